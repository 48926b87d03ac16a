"""A long text's Overview in the browser: from Run to every head's thumbnail painted, in Debian's Chromium, on the
model bench/long.py measures on the CPU (Llama-shaped, 4 layers × 8 heads of 64, 2 key/value heads; random weights
and a small byte-level tokenizer, built here), against our fused forward of the same tokens with no map (the floor),
timed in this process.

    python bench/long_page.py [--tokens 8192] [--repeats 1]

The page runs the long implementation (ui/compute/longruns.py: one pass keeping q, k and row log-sum-exps, every
head's exact block means and maxima pooled from the same scores) with its progress bar; the time is the wall clock
from the click on Run to the Overview's figure drawn with the page settled. Target (issue "Long inputs"): at most
30 s at 8,192 tokens.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[1:1] = [str(ROOT), str(ROOT / "tests" / "helpers")]

WORDS = "the cat sat on the mat because it was tired and she read the book .".split()
SHAPE = dict(hidden_size=512, num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, head_dim=64,
             intermediate_size=2048, max_position_embeddings=8192)  # fmt: skip


def build(folder: Path) -> Path:
    from families import make_family

    if not (folder / "config.json").exists():
        make_family(folder, "llama", **SHAPE)
    return folder


def text_of(tokenizer, n_tokens: int) -> tuple[str, int]:
    """Words repeated to at most `n_tokens` tokens as the app reads them (its special tokens included)."""
    words, count = 0, 0
    step = 512
    while step:
        trial = " ".join(WORDS[i % len(WORDS)] for i in range(words + step))
        found = len(tokenizer(trial)["input_ids"])
        if found <= n_tokens:
            words, count = words + step, found
        else:
            step //= 2
    return " ".join(WORDS[i % len(WORDS)] for i in range(words)), count


def fused_seconds(folder: Path, text: str) -> float:
    from attention import load_model
    from attention.core.request import MapRequest

    model, tokenizer = load_model(str(folder))
    ids = tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        model(ids[:, :64], request=MapRequest(layers=(), keep_hidden=False))  # warm-up
        start = time.perf_counter()
        model(ids, request=MapRequest(layers=(), keep_hidden=False))
    return time.perf_counter() - start


def page_seconds(folder: Path, text: str, n_tokens: int) -> tuple[float, bool]:
    """Run to the Overview painted; whether the progress bar was seen on the way."""
    from browser import served_chromium, wait_settled

    os.environ["ATTENTION_FILE_DIRS"] = str(folder.parent)
    with served_chromium() as (browser, url):
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(url + "/?" + urllib.parse.urlencode({"model": str(folder), "view": "overview"}))
        page.wait_for_selector(".js-plotly-plot", timeout=180_000)
        wait_settled(page)
        page.locator("textarea").first.fill(text)
        start = time.perf_counter()
        page.get_by_role("button", name="Run", exact=True).first.click()
        seen = False
        while time.perf_counter() - start < 900:
            seen = seen or page.locator('[data-testid="stProgress"]').count() > 0
            ran = f"Token strip: {n_tokens} pieces" in page.inner_text("body")  # the new text's page, not the last
            drawn = ran and page.locator('[data-testid="stPlotlyChart"]', has_text="H7").count() > 0
            if drawn and page.locator('[data-testid="stStatusWidget"]').count() == 0:
                break
            time.sleep(0.1)
        wait_settled(page)
        return time.perf_counter() - start, seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(2)
    folder = build(Path(tempfile.gettempdir()) / "attention-bench-long-page" / "llama-4x8")
    from transformers import AutoTokenizer

    text, n_tokens = text_of(AutoTokenizer.from_pretrained(str(folder)), args.tokens)
    print(f"{n_tokens:,} tokens; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} at the start")
    floor = fused_seconds(folder, text)
    for _ in range(args.repeats):
        seconds, seen = page_seconds(folder, text, n_tokens)
        print(f"Overview painted {seconds:.1f} s after Run (target <= 30 s), progress bar "
              f"{'seen' if seen else 'NOT seen'}; the fused forward alone {floor:.1f} s: {seconds / floor:.1f}×; "
              f"load average {os.getloadavg()[0]:.1f}")  # fmt: skip


if __name__ == "__main__":
    main()
