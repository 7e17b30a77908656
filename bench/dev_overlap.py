"""Which dev records answered a question the evaluation reports (issue 35's "never tune on what you
report"): xmedbench_dev's English files are drawn from MIRAGE's sources (all 209 of its MedMCQA and
all 63 of its MedQA-USMLE questions are MIRAGE questions), so a dev pool cut from them can hold
questions of the seeded subsets whose records are committed under ``bench/results/eval/runs``.

For every record under ``bench/results`` (outside the evaluation's own runs) whose id names an
xmedbench_dev English line (``<source>-<line>``), the question's text is compared with every
reported question's (first 80 characters, lower-cased, whitespace folded); the table counts, per
dev folder, the questions answered and those that are reported ones.

    python bench/dev_overlap.py
"""

from __future__ import annotations

import json
from collections import defaultdict

from gate_dev_en2 import ROOT, SHARED, key, reported_keys

RESULTS = ROOT / "bench" / "results"
SOURCES = ("medmcqa", "medqa-usmle", "mmlu-medical", "pubmedqa")


def main() -> None:
    rep = reported_keys(json.loads((SHARED / "mirage" / "benchmark.json").read_text(encoding="utf-8")))
    lines = {s: [json.loads(x)["question"] for x in (SHARED / "xmedbench_dev" / "en" / f"{s}.jsonl")
                 .read_text(encoding="utf-8").splitlines()] for s in SOURCES}
    seen: dict[str, set[str]] = defaultdict(set)
    for f in RESULTS.rglob("*.json"):
        rel = f.relative_to(RESULTS)
        if rel.parts[:2] == ("eval", "runs") or f.stem.startswith("manifest"):
            continue
        src, _, n = f.stem.rpartition("-")
        if src in lines and n.isdigit():
            seen["/".join(rel.parts[:2] if rel.parts[0] == "eval" else rel.parts[:1])].add(key(lines[src][int(n) - 1]))
    print("| dev folder | questions | of them reported |\n|---|---:|---:|")
    for folder, qs in sorted(seen.items()):
        print(f"| `{folder}` | {len(qs)} | {len(qs & rep)} |")


if __name__ == "__main__":
    main()
