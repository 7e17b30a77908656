"""Replay of the thin-context rules on dev (issue 35; run.sh answers the questions). For the dev
questions where medr2's context held at most one passage, the letter each rule would give:
medr2 as it is, medr2 with the relevance floor off (floor0/), the letter without evidence (direct)
and vanilla RAG's letter (both bench/results/gate-dev-generated). Writes thin-dev.md beside this file."""

import json
import sys
from math import comb
from pathlib import Path

HERE = Path(__file__).resolve().parent
GEN = HERE.parents[1] / "gate-dev-generated"


def load(root: Path, method: str) -> dict:
    out = {}
    for f in root.glob(f"*/{method}/*/*.json"):
        if f.name != "manifest.json":
            r = json.loads(f.read_text())
            r = r[1] if isinstance(r, list) else r
            out[(f.parts[-4], r["id"])] = r
    return out


def mcnemar(b: int, c: int) -> float:
    n, k = b + c, min(b, c)
    return 1.0 if n == 0 else min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2 ** n)


def main() -> int:
    rules = {"medr2 as it is": load(HERE / "floor", "medr2"), "medr2, floor off": load(HERE / "floor0", "medr2"),
             "without evidence (direct)": load(GEN, "direct"), "vanilla RAG's context": load(GEN, "vanilla_rag")}
    base = rules["medr2 as it is"]
    keys = sorted(k for k, r in base.items() if len(r["context"]) <= 1 and all(k in v for v in rules.values()))
    other = sorted(k for k, r in base.items() if len(r["context"]) > 1)
    missing = sum(len(r["context"]) <= 1 and not all(k in v for v in rules.values()) for k, r in base.items())
    lines = [f"# Thin contexts on dev (thin-dev/run.sh, compare.py)", "",
             f"{len(base)} dev questions answered by medr2; its context held at most one passage for "
             f"{len(keys)} of them (the rows below), two or more for {len(other)}"
             + (f"; {missing} thin one(s) lack a record of some rule (not answered yet)." if missing else "."), "",
             "| rule for a thin context | right | of | vs medr2 as it is: + / - (p) |", "|---|---:|---:|---:|"]
    for name, recs in rules.items():
        right = sum(recs[k]["correct"] for k in keys)
        b = sum(recs[k]["correct"] and not base[k]["correct"] for k in keys)
        c = sum(base[k]["correct"] and not recs[k]["correct"] for k in keys)
        lines.append(f"| {name} | {right} | {len(keys)} | {b} / {c} ({mcnemar(b, c):.2f}) |")
    lines += ["", "Passages in the context with the floor off (thin questions): "
              + ", ".join(str(len(rules["medr2, floor off"][k]["context"])) for k in keys)]
    (HERE / "thin-dev.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
