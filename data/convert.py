"""Convert the public coreference sets (Winogender, GAP) into this project's JSONL format.

    python data/convert.py [--shared ../shared/datasets] [--out data]

Reads the files exactly as published (see each folder's SOURCE) and writes, deterministically,
winogender.jsonl (720 lines), gap-development.jsonl (2000) and gap-validation.jsonl (454), plus each
set's licence as LICENSE-winogender and LICENSE-gap. Every mention is given by character offsets
({"text", "start"}); the set's own labels are kept as extra fields. data/README.md describes both.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SHARED = ROOT.parent / "shared" / "datasets"
WINOGENDER_SOURCE = "Winogender Schemas, Rudinger et al. 2018 (MIT licence)"
GAP_SOURCE = "GAP Coreference, Webster et al. 2018 (Apache License 2.0)"

# Winogender's pronoun slots and their words per gender
PRONOUNS = {
    "NOM": ("nominative", {"male": "he", "female": "she", "neutral": "they"}),
    "POSS": ("possessive", {"male": "his", "female": "her", "neutral": "their"}),
    "ACC": ("accusative", {"male": "him", "female": "her", "neutral": "them"}),
}
# GAP's pronoun words and the gender its scorer reports them under
GAP_GENDER = {
    "he": "masculine",
    "his": "masculine",
    "him": "masculine",
    "she": "feminine",
    "her": "feminine",
    "hers": "feminine",
}


def read_tsv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def mention(text: str, word: str, start: int) -> dict:
    assert text[start : start + len(word)] == word, (text, word, start)
    return {"text": word, "start": start}


def instantiate(template: str, occupation: str, participant: str, pronoun: str) -> tuple[str, dict[str, int]]:
    """Fill a Winogender template the way its sentences were generated; returns the sentence and where
    each slot's words start. `participant` "someone" replaces "the $PARTICIPANT" (or "a …") as a whole."""
    if participant == "someone":
        template = re.sub(
            r"\b(?:[Tt]he|[Aa]n?) \$PARTICIPANT", lambda m: "Someone" if m.group()[0].isupper() else "someone", template
        )
    out, starts, at = [], {}, 0
    for piece in re.split(r"(\$[A-Z_]+)", template):
        if piece.startswith("$"):
            slot = piece[1:]
            word = {"OCCUPATION": occupation, "PARTICIPANT": participant}.get(slot, pronoun)
            starts[slot if slot in ("OCCUPATION", "PARTICIPANT") else "PRONOUN"] = at
            piece = word
        out.append(piece)
        at += len(piece)
    sentence = "".join(out)
    if participant == "someone":
        starts["PARTICIPANT"] = sentence.lower().index("someone")
    return sentence, starts


def same_place(filled: str, text: str, start: int) -> int:
    """Where the word at `start` of `filled` is in `text`: the same occurrence of the same word.
    The published sentences differ from a plain filling only in verb agreement after "they"."""
    word = re.match(r"\w+", filled[start:]).group()
    pattern = rf"\b{word}\b"
    nth = len(re.findall(pattern, filled[:start], flags=re.IGNORECASE))
    return [m.start() for m in re.finditer(pattern, text, flags=re.IGNORECASE)][nth]


def winogender(folder: Path) -> list[dict]:
    templates = {
        (t["occupation(0)"], t["other-participant(1)"], t["answer"]): t["sentence"]
        for t in read_tsv(folder / "templates.tsv")
    }
    stats = {s["occupation"]: s for s in read_tsv(folder / "occupations-stats.tsv")}
    rows = []
    for line in read_tsv(folder / "all_sentences.tsv"):
        occupation, participant, answer, gender, _ = line["sentid"].split(".")
        partner = (
            participant
            if participant != "someone"
            else next(p for (o, p, a) in templates if o == occupation and a == answer)
        )
        template = templates[(occupation, partner, answer)]
        slot = re.search(r"\$(NOM|POSS|ACC)_PRONOUN", template).group(1)
        pronoun_type, words = PRONOUNS[slot]
        filled, starts = instantiate(template, occupation, participant, words[gender])
        text = line["sentence"]  # as published: "they" takes a plural verb there ("they were")
        assert filled == text or gender == "neutral", (filled, text)
        starts = {slot: same_place(filled, text, start) for slot, start in starts.items()}
        occ = mention(text, occupation, starts["OCCUPATION"])
        part = mention(
            text, text[starts["PARTICIPANT"] : starts["PARTICIPANT"] + len(participant)], starts["PARTICIPANT"]
        )
        role = "occupation" if answer == "0" else "participant"
        rows.append(
            {
                "id": line["sentid"].removesuffix(".txt"),
                "text": text,
                "pronoun": mention(text, words[gender], starts["PRONOUN"]),
                "candidates": [occ, part],
                "answer": (occ if role == "occupation" else part)["text"],
                "gender": gender,
                "occupation": occupation,
                "participant": participant,
                "answer_role": role,
                "pronoun_type": pronoun_type,
                "bergsma_pct_female": float(stats[occupation]["bergsma_pct_female"]),
                "bls_pct_female": float(stats[occupation]["bls_pct_female"]),
                "source": WINOGENDER_SOURCE,
            }
        )
    return rows


def gap(folder: Path, split: str) -> list[dict]:
    rows = []
    for line in read_tsv(folder / f"gap-{split}.tsv"):
        text = line["Text"]
        a_coref, b_coref = (line[k] == "TRUE" for k in ("A-coref", "B-coref"))
        assert not (a_coref and b_coref), line["ID"]
        answer = line["A"] if a_coref else line["B"] if b_coref else None
        rows.append(
            {
                "id": line["ID"],
                "text": text,
                "pronoun": mention(text, line["Pronoun"], int(line["Pronoun-offset"])),
                "candidates": [
                    mention(text, line["A"], int(line["A-offset"])),
                    mention(text, line["B"], int(line["B-offset"])),
                ],
                "answer": answer,
                "a_coref": a_coref,
                "b_coref": b_coref,
                "gender": GAP_GENDER[line["Pronoun"].lower()],
                "split": split,
                "url": line["URL"],
                "source": GAP_SOURCE,
            }
        )
    return rows


def write_jsonl(rows: list[dict], path: Path) -> None:
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def convert(shared: Path, out: Path) -> dict[str, int]:
    """Write every converted file into `out`; returns the number of lines of each."""
    out.mkdir(parents=True, exist_ok=True)
    sets = {
        "winogender.jsonl": winogender(shared / "winogender"),
        "gap-development.jsonl": gap(shared / "gap", "development"),
        "gap-validation.jsonl": gap(shared / "gap", "validation"),
    }
    for name, rows in sets.items():
        write_jsonl(rows, out / name)
    for name in ("winogender", "gap"):
        shutil.copyfile(shared / name / "LICENSE", out / f"LICENSE-{name}")
    return {name: len(rows) for name, rows in sets.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--shared",
        type=Path,
        default=DEFAULT_SHARED,
        help=f"folder holding winogender/ and gap/ (default {DEFAULT_SHARED})",
    )
    ap.add_argument("--out", type=Path, default=ROOT / "data", help="where to write (default data/)")
    args = ap.parse_args(argv)
    if not (args.shared / "winogender").is_dir() or not (args.shared / "gap").is_dir():
        print(f"error: {args.shared} has no winogender/ and gap/ folders", file=sys.stderr)
        return 2
    for name, count in convert(args.shared, args.out).items():
        print(f"{args.out / name}: {count} examples")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
