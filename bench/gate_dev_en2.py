"""A second, fresh English dev pool for the evidence gate (issue 35), written as a MIRAGE-format
``benchmark.json`` under ``bench/out/gate-dev-en2/`` (derived from ../shared/data, never committed).

The first English gate pool (``bench/results/gate-dev``: xmedbench_dev's English files, 125
questions) chose the gate of 2026-12-04. This pool holds none of its questions, and none of the
questions the evaluation reports (the seeded subsets whose records are committed under
``bench/results/eval/runs``): xmedbench_dev's English files are drawn from the same sources as
MIRAGE (all 209 of its MedMCQA questions and all 63 of its MedQA-USMLE questions are MIRAGE
questions), so every candidate is checked against the reported questions' text.

Sets (MIRAGE's names, so ``medr2 eval run --dataset NAME --benchmark FILE`` reads them and a
PubMedQA question keeps its PMID, whose own abstract retrieval then leaves out):

- ``mmlu``: MMLU-medical dev and val (``mmlu_med``, no question that is also a MIRAGE MMLU test
  question) and xmedbench_dev's unused ``mmlu-medical`` questions; a seeded 80.
- ``medqa``: xmedbench_dev's unused ``medqa-usmle`` questions (all of them).
- ``medmcqa``: xmedbench_dev's unused ``medmcqa`` questions; a seeded 80.
- ``pubmedqa``: PubMedQA's expert-labelled questions outside the 500 test ids (MIRAGE's
  PubMedQA*); a seeded 80, yes / no / maybe as MIRAGE maps them.

    python bench/gate_dev_en2.py        # writes bench/out/gate-dev-en2/benchmark.json and prints the counts
"""

from __future__ import annotations

import csv
import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from medr2.eval.datasets import parse_option_block  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "benchmarks"
OUT = ROOT / "bench" / "out" / "gate-dev-en2"
USED = ROOT / "bench" / "results" / "gate-dev"  # the first English gate pool's records
REPORTED = ROOT / "bench" / "results" / "eval" / "runs"  # the evaluation's committed records
SEED, N = 35, 80
PUBMEDQA = {"yes": "A", "no": "B", "maybe": "C"}


def key(text: str) -> str:
    """Questions compare by their first 80 characters, lower-cased, whitespace folded."""
    return " ".join(text.lower().split())[:80]


def reported_keys(mirage: dict) -> set[str]:
    """The text keys of every question the evaluation reports (any committed record of any method)."""
    out = set()
    for name, items in mirage.items():
        for f in REPORTED.glob(f"{name}/*/*/*.json"):
            if not f.name.startswith("manifest") and f.stem in items:
                out.add(key(items[f.stem]["question"]))
    return out


def used_lines(source: str) -> set[int]:
    """Line numbers (1-based, the xmedbench loader's ids) the first pool answered from ``source``."""
    return {int(f.stem.rsplit("-", 1)[1]) for f in USED.glob(f"{source}/*/*/{source}-*.json")}


def xmed_rows(source: str, banned: set[str]) -> list[dict]:
    path = SHARED / "xmedbench_dev" / "en" / f"{source}.jsonl"
    used = used_lines(source)
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        r = json.loads(line)
        if n in used or key(r["question"]) in banned:
            continue
        out.append({"id": f"{source}-{n}", "question": r["question"], "options": parse_option_block(r["option"]),
                    "answer": r["anwer"].strip("() .")})
    return out


def mmlu_rows(banned: set[str]) -> list[dict]:
    out = []
    for f in sorted((SHARED / "mmlu_med").glob("*/*.csv")):
        with open(f, encoding="utf-8", newline="") as fh:
            for n, row in enumerate(csv.reader(fh), 1):
                if key(row[0]) not in banned:
                    out.append({"id": f"{f.stem}-{n}", "question": row[0], "options": dict(zip("ABCD", row[1:5])),
                                "answer": row[5].strip().upper()})
    return out


def seeded(rows: list[dict], n: int) -> list[dict]:
    rows = sorted(rows, key=lambda r: r["id"])
    return rows if len(rows) <= n else sorted(random.Random(SEED).sample(rows, n), key=lambda r: r["id"])


def main() -> None:
    mirage = json.loads((SHARED / "mirage" / "benchmark.json").read_text(encoding="utf-8"))
    reported = reported_keys(mirage)
    mirage_mmlu = {key(q["question"]) for q in mirage["mmlu"].values()}
    pools = {
        "mmlu": seeded(mmlu_rows(reported | mirage_mmlu) + xmed_rows("mmlu-medical", reported), N),
        "medqa": seeded(xmed_rows("medqa-usmle", reported), 10 ** 6),
        "medmcqa": seeded(xmed_rows("medmcqa", reported), N),
    }
    pqal = json.loads((SHARED / "pubmedqa" / "ori_pqal.json").read_text(encoding="utf-8"))
    test = json.loads((SHARED / "pubmedqa" / "test_ground_truth.json").read_text(encoding="utf-8"))
    pool = [{"id": pmid, "question": r["QUESTION"], "options": {"A": "yes", "B": "no", "C": "maybe"},
             "answer": PUBMEDQA[r["final_decision"]], "PMID": [int(pmid)]}
            for pmid, r in pqal.items() if pmid not in test and key(r["QUESTION"]) not in reported]
    pools["pubmedqa"] = seeded(pool, N)
    bench = {name: {r.pop("id"): r for r in rows} for name, rows in pools.items()}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "benchmark.json").write_text(json.dumps(bench, ensure_ascii=False, indent=0), encoding="utf-8")
    print(f"{OUT / 'benchmark.json'}: " + ", ".join(f"{k} {len(v)}" for k, v in bench.items()))


if __name__ == "__main__":
    main()
