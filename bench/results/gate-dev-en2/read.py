"""The rule of PLAN.md read on the pool's records (issue 35): gate A (weight 0.5, no confidence
rule) against gate B (weight 0.4, the confidence rule) and direct answering, macro accuracy over
the four sets and paired McNemar counts; ``--rounds R`` keeps only the first 20 x R questions of
each set (MedQA-USMLE holds 26), those ``--limit`` picks, so that an unfinished round is left out.

    .venv/bin/python bench/results/gate-dev-en2/read.py            # every record
    .venv/bin/python bench/results/gate-dev-en2/read.py --rounds 2  # the first 40 per set
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from tune_gate import gated, load, macro_accuracy  # noqa: E402

from medr2.apply.gate import best_letter, decide  # noqa: E402
from medr2.eval.scoring import mcnemar_p  # noqa: E402

POOL = ROOT / "bench" / "out" / "gate-dev-en2" / "benchmark.json"


def answer_order() -> dict[str, list[str]]:
    """Each set's question ids in the pool file's order: ``medr2 eval run --limit N`` takes the first
    N of it (and answers them in a seeded order)."""
    pool = json.loads(POOL.read_text(encoding="utf-8"))
    return {name: list(qs) for name, qs in pool.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, help="keep the first 20 x ROUNDS of each set (the pool file's order)")
    args = ap.parse_args()
    recs = load(sorted(HERE.glob("*/vanilla_rag+loglik/*")))
    if args.rounds:
        order = answer_order()
        keep = {(ds, q) for ds, ids in order.items() for q in ids[: 20 * args.rounds]}
        recs = [r for r in recs if (r["dataset"], r["id"]) in keep]
        for ds, ids in order.items():
            have = sum(r["dataset"] == ds for r in recs)
            if have < min(20 * args.rounds, len(ids)):
                print(f"warning: {ds} has {have} of its first {min(20 * args.rounds, len(ids))}: round "
                      f"{args.rounds} is not complete there", file=sys.stderr)
    letters = {
        "direct": lambda r: best_letter(r["s0"]),
        "vanilla RAG": lambda r: best_letter(r["s1"]),
        "A (0.5, no rule)": lambda r: gated(r, 0.0, 0.5),
        "B (0.4, rule)": lambda r: gated(r, 0.0, 0.4, True),
    }
    sets = sorted({r["dataset"] for r in recs})
    print(f"{len(recs)} records: " + ", ".join(f"{s} {sum(r['dataset'] == s for r in recs)}" for s in sets) + "\n")
    print("| answer | " + " | ".join(sets) + " | macro | right |")
    print("|---|" + "---:|" * (len(sets) + 2))
    right = {}
    for name, f in letters.items():
        acc = macro_accuracy(recs, f)
        right[name] = {(r["dataset"], r["id"]): f(r) == r["gold"] for r in recs}
        print(f"| {name} | " + " | ".join(f"{100 * acc[s]:.1f}" for s in sets)
              + f" | {100 * acc['macro']:.1f} | {sum(right[name].values())} |")
    print()
    for a, b in (("A (0.5, no rule)", "B (0.4, rule)"), ("A (0.5, no rule)", "direct"), ("B (0.4, rule)", "direct"),
                 ("vanilla RAG", "direct")):
        x = sum(right[a][k] and not right[b][k] for k in right[a])
        y = sum(right[b][k] and not right[a][k] for k in right[a])
        print(f"{a} vs {b}: {x} / {y}, McNemar p {mcnemar_p(x, y):.3f}")
    n_used = sum(decide(r["s0"], r["s1"], r["rel"], 0.0, 0.4, True).evidence_used for r in recs)
    print(f"\nB reads the evidence on {n_used} of {len(recs)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
