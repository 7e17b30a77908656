"""Letter preference of log-likelihood answering, from the committed run records (no model call).

For each dataset with a ``METHOD+loglik`` run under ``bench/results/eval/runs`` (``--method``,
default ``direct``; ``vanilla_rag`` or ``medr2`` measure it with evidence) it prints the right
answers of
- the run itself (the letter with the highest log-probability),
- the ``METHOD+loglik-cal`` run beside it, if any (content-free calibration, made by e.g.
  ``python bench/eval.py --phase direct --answer-mode loglik-cal``),
- batch calibration recomputed here: each question's letter probabilities (normalised over its
  options) divided by the mean probability of each letter over the set's *other* questions, so a
  question never calibrates itself,

and the paired comparison of each calibration against the run (exact McNemar).

    python bench/calibration.py [--method vanilla_rag]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUNS = ROOT / "bench" / "results" / "eval" / "runs"
SCORES = re.compile(r"([A-Z]) (-?\d+(?:\.\d+)?)")


def letter_scores(run_dir: Path) -> dict[str, tuple[dict[str, float], str]]:
    """Question id -> (log-probability of each letter as the run recorded it, gold letter)."""
    out = {}
    for f in sorted(run_dir.glob("*.json")):
        if f.name.startswith("manifest"):
            continue
        mirage, record = json.loads(f.read_text(encoding="utf-8"))
        why = json.loads(mirage)["step_by_step_thinking"].split(";")[0]
        out[record["id"]] = ({k: float(v) for k, v in SCORES.findall(why)}, record["gold"])
    return out


def batch_calibrated_right(scores: dict[str, tuple[dict[str, float], str]]) -> dict[str, bool]:
    from medr2.eval.scoring import batch_calibrated

    cal = batch_calibrated({i: s for i, (s, _) in scores.items()})
    return {i: max(sorted(c), key=lambda k: c[k]) == scores[i][1] for i, c in cal.items()}


def main() -> int:
    from medr2.eval.scoring import mcnemar_p

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--method", default="direct", help="the run's method directory, less '+loglik' (default direct)")
    method = ap.parse_args().method

    found = False
    print("| dataset | N | loglik | content-free calibrated (only loglik / only it right, p) "
          "| batch calibrated (only loglik / only it right, p) |")
    print("|---|---:|---:|---:|---:|")
    for ds in sorted(p for p in RUNS.iterdir() if p.is_dir()):
        for run in sorted((ds / f"{method}+loglik").glob("*/")):
            found = True
            scores = letter_scores(run)
            base = {i: max(sorted(s), key=lambda k: s[k]) == g for i, (s, g) in scores.items()}
            cells = []
            cf_dir = ds / f"{method}+loglik-cal" / run.name
            others = []
            if cf_dir.is_dir():
                recs = [json.loads(f.read_text(encoding="utf-8"))[1] for f in cf_dir.glob("*.json")
                        if not f.name.startswith("manifest")]
                others.append({r["id"]: bool(r["correct"]) for r in recs})
            else:
                others.append(None)
            others.append(batch_calibrated_right(scores))
            for other in others:
                if other is None:
                    cells.append("–")
                    continue
                ids = set(other) & set(base)
                b = sum(base[i] and not other[i] for i in ids)
                c = sum(other[i] and not base[i] for i in ids)
                cells.append(f"{sum(other[i] for i in ids)} ({b} / {c}, p = {mcnemar_p(b, c):.3f})")
            print(f"| {ds.name} | {len(base)} | {sum(base.values())} | {cells[0]} | {cells[1]} |")
    if not found:
        print(f"no {method}+loglik run under {RUNS}: run e.g. `python bench/eval.py --phase direct` first",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
