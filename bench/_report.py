"""The load bench's report (bench/load.py): the room, what each stranger's visitor saw, every ordinary
submission, memory and the server after the storm, each against its target; MISSED where one is not met."""

from __future__ import annotations

import statistics
from pathlib import Path

from _rig import load_average, machine
from _room import DRIVER_LAG
from _strangers import HOSTILE_SESSIONS

RSS_TARGET_MB, SUBMIT_TARGET_S = 1536.0, 5.0


def verdict(ok: bool) -> str:
    return "met" if ok else "MISSED"


def server_log_errors(log_path: Path) -> list[str]:
    lines = log_path.read_text(errors="replace").splitlines()
    return [line for line in lines if "Traceback" in line or "ERROR" in line or "unexpected error" in line]


def print_problems(title: str, items: list[str]) -> None:
    if items:
        print(f"!!! {title} ({len(items)}):")
        for item in items[:20]:
            print("    " + item)


def print_room(out: dict, pid: int) -> None:
    s, k, kinds = out["storm"], out["n"] - HOSTILE_SESSIONS, out["kinds"]
    print(f"machine: {machine()}")
    print(f"scheduling: {out['scheduling']}")
    print(
        f"load average (1/5/15 min): {out['load']} at the start, {load_average()} at the end; "
        "other work on the machine slows every time here"
    )
    room = (
        f"{k} ordinary: {kinds.count('page')} in a browser page on this machine, drawing included, and "
        f"{kinds.count('laptop')} as laptops (clients that send the server what a page sends and time its "
        "answer; the drawing is on their own cores)"
        if "laptop" in kinds
        else f"{k} ordinary, all in browser pages on this machine"
    )
    print(
        f"{out['n']} sessions (Chromium {out['chromium']}, one context each) against one app server, pid "
        f"{pid}, on 127.0.0.1, locked to the bundled model: {room}; {HOSTILE_SESSIONS} hostile (in a "
        "Chromium of their own at idle priority, as their browsers are elsewhere in a room)"
    )
    print(
        f"all sessions opened in {out['open_s']:.1f} s ({out['open_cpu']}); "
        f"server RSS then {out['idle_mb']:.0f} MB, peak so far {out['open_peak_mb']:.0f} MB"
    )
    if out["control"]:
        print(
            f"\nCONTROL RUN: the {HOSTILE_SESSIONS} hostile sessions stay idle. {s['wall_s']:.1f} s from the "
            f"moment the {k} ordinary sessions pressed Run together; then each submitted again {out['think']:g} s "
            "after its last was drawn"
        )
    else:
        print(
            f"\nstorm: {s['wall_s']:.1f} s from the moment the {k} ordinary sessions pressed Run together and the "
            f"hostile ones struck; then each ordinary session submitted again {out['think']:g} s after its last "
            "was drawn, until the hostile cases were done"
        )
    print(f"  {s['cpu']}")


def print_cases(cases: list[dict]) -> list[str]:
    """What each hostile visitor saw; returns the missed targets."""
    if cases:
        print("\nhostile cases (seconds from the start of the storm; what the visitor saw):")
    missed = []
    for case in cases:
        print(
            f"  - {case['name']}: {case['from_s']:.1f} s -> {case['to_s']:.1f} s"
            + (f"; DID NOT FINISH: {case['failed']}" if case["failed"] else "")
        )
        for text in case["messages"]:
            print(f"      message: {text[:400]}")
        for text in case["uploader"]:
            print(f"      upload box: {text[:400]}")
        if not case["messages"] and not case["uploader"]:
            print("      message: none")
        print(
            f"      figures drawn: {case['charts']}; exception box: "
            + (f"YES ({len(case['exceptions'])}): {case['exceptions'][0]}" if case["exceptions"] else "none")
            + ("; a TRACEBACK in the page's text" if case["traceback"] else "; no traceback in the page's text")
        )
        if case["failed"] or case["exceptions"] or case["traceback"] or case.get("unreadable"):
            missed.append(f"hostile case '{case['name']}' did not end in a clear message")
    return missed


def print_submissions(out: dict) -> tuple[list[str], int]:
    """Each ordinary session's submissions and the target; returns (missed targets, submissions served)."""
    print(
        "\nordinary sessions, each submission @ seconds into the storm: for a page, pressing Run -> own tokens "
        "on own heatmap (s) / pressing Run -> the server's last websocket frame before them, as the page "
        "received it (s); for a laptop, sending the press of Run -> the message bringing its heatmap (s)"
    )
    every, server, pages, answers = [], [], [], []
    for i, (word, kind, subs) in enumerate(zip(out["words"], out["kinds"], out["storm"]["per_session"])):
        every += [lat for _, lat, _ in subs]
        (answers if kind == "laptop" else pages).extend(lat for _, lat, _ in subs)
        server += [part for _, _, part in subs if part is not None]
        shown = ", ".join(
            (
                "TIMED OUT"
                if lat is None
                else f"{lat:.2f}" + ("" if kind == "laptop" else "/" + ("?" if part is None else f"{part:.2f}"))
            )
            + f" @{at:.0f}"
            for at, lat, part in subs
        )
        worst = "TIMED OUT" if any(lat is None for _, lat, _ in subs) else f"{max(lat for _, lat, _ in subs):.2f} s"
        print(f"  session {i:>2} ({word:<8}, {kind:<6}) {len(subs)} submissions, max {worst}: {shown}")
    for name, times in (("in a page on this machine", pages), ("from a laptop, the server's answer", answers)):
        done = [t for t in times if t is not None]
        if done:
            print(
                f"  {len(times)} submissions {name}: median {statistics.median(done):.2f} s, max {max(done):.2f} s"
                + (f"; {len(times) - len(done)} TIMED OUT" if len(done) < len(times) else "")
            )
    if server:
        print(
            f"  the server's part in the page (pressing Run -> its last frame before the tokens were drawn): "
            f"median {statistics.median(server):.2f} s, max {max(server):.2f} s; the rest is the browser drawing"
        )
    draw = out.get("alone") or 0.0
    if answers:
        print(
            f"  what drawing adds on a laptop: the page on this machine, alone before the storm, was served and "
            f"drawn in {draw:.2f} s (counted in full below, its server's part too)"
        )
    if DRIVER_LAG:
        print(
            f"  (times by the page's clock: this driver heard of a drawn answer a median "
            f"{statistics.median(DRIVER_LAG):.2f} s, at most {max(DRIVER_LAG):.2f} s, after the page made the "
            "frame showing it)"
        )
    slow = [t for t in pages if t is None or t > SUBMIT_TARGET_S]
    slow += [t for t in answers if t is None or t + draw > SUBMIT_TARGET_S]
    ok = not slow and (not answers or out.get("alone") is not None)
    print(
        f"  target: every ordinary submission <= {SUBMIT_TARGET_S:.0f} s"
        + (f" (a laptop's: its answer + {draw:.2f} s of drawing)" if answers else "")
        + f": {verdict(ok)}"
        + ("" if not slow else f" ({len(slow)} of {len(every)} over)")
    )
    missed = [f"{len(slow)} of {len(every)} ordinary submissions took over {SUBMIT_TARGET_S:.0f} s"] if slow else []
    if answers and out.get("alone") is None:
        missed.append("the page's submission alone before the storm was not drawn")
    return missed, sum(t is not None for t in every)


def print_after(out: dict, peak_mb: float) -> list[str]:
    """Memory and the server after the storm; returns the missed targets."""
    missed = []
    rss_ok = peak_mb <= RSS_TARGET_MB
    print(
        f"\npeak server RSS: {out['storm_peak_mb']:.0f} MB in the storm, {peak_mb:.0f} MB over the whole run "
        f"(target <= {RSS_TARGET_MB:.0f} MB: {verdict(rss_ok)}); {out['closed_mb']:.0f} MB after every session "
        "closed"
    )
    if not rss_ok:
        missed.append(f"peak server RSS {peak_mb:.0f} MB over {RSS_TARGET_MB:.0f} MB")
    word, latency = out["after"]
    alive = out["alive"] and out["health"].startswith("200") and latency is not None
    print(
        f"server after the storm: process {'running' if out['alive'] else 'GONE'}; /_stcore/health answered "
        f"{out['health']}; one more submission ('{word}') "
        + ("TIMED OUT" if latency is None else f"served in {latency:.2f} s")
        + f"; health then {out['after_health']} (alive: {verdict(alive)})"
    )
    if not alive:
        missed.append("the server did not stay alive")
    return missed


def report(out: dict, pid: int, peak_mb: float, log_errors: list[str]) -> int:
    """Prints the summary; returns the exit status."""
    s = out["storm"]
    print_room(out, pid)
    missed = print_cases(s["cases"])
    late, served = print_submissions(out)
    missed += late + print_after(out, peak_mb)
    leaks = [p for p in s["problems"] if p.startswith("ISOLATION")]
    print(
        "isolation: "
        + (
            f"VIOLATED in {len(leaks)} checks"
            if leaks
            else "every ordinary session showed its own marker and no other session's"
        )
    )
    print_problems("problems seen by the ordinary sessions", s["problems"])
    print("error boxes on the ordinary pages: " + ("none" if not s["errors"] else f"{len(s['errors'])}"))
    print_problems("error boxes", s["errors"])
    print("server log: " + ("no errors" if not log_errors else f"{len(log_errors)} error lines"))
    print_problems("server log", log_errors)
    missed += [f"problem: {p}" for p in s["problems"]] + [f"error box: {e}" for e in s["errors"]]
    missed += ["server log has errors"] if log_errors else []
    print()
    for line in missed:
        print(f"MISSED: {line}")
    print("TARGETS " + ("MISSED" if missed else "met"))
    if leaks:
        print("!!! ISOLATION VIOLATED: a session was shown another session's sentence")
        return 1
    return 0 if served else 2
