"""Direct loglik answers of the AVX-512 llama.cpp build (``direct-avx512/``) against the committed
grid's (``bench/results/eval/runs``, the AVX2 build), question by question (bench/README.md, CPU speed).

    python compare_build.py
"""
import glob
import json
import math
import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
GRID = HERE.parents[1] / "eval" / "runs"
LL = re.compile(r"([A-Z]) (-?\d+\.\d+)")


def margin(rec):
    """Log-likelihood gap between the best and the second-best option letter."""
    head = rec[0] if isinstance(rec[0], dict) else json.loads(rec[0])
    scores = sorted((float(v) for _, v in LL.findall(head["step_by_step_thinking"])), reverse=True)
    return scores[0] - scores[1] if len(scores) > 1 else math.inf


rows = []
for f in sorted(glob.glob(str(HERE / "direct-avx512" / "*" / "direct+loglik" / "*" / "*.json"))):
    if f.endswith("manifest.json"):
        continue
    p = Path(f)
    old = glob.glob(str(GRID / p.parts[-4] / "direct+loglik" / "*" / p.name))
    if not old:
        continue
    a, b = json.load(open(old[0])), json.load(open(f))
    rows.append((p.parts[-4], b[1]["gold"], a[1]["prediction"], b[1]["prediction"], margin(a), margin(b)))
print(f"{len(rows)} questions; same prediction {sum(r[2] == r[3] for r in rows)}")
for name in sorted({r[0] for r in rows}) + ["all"]:
    sel = [r for r in rows if name in ("all", r[0])]
    print(f"{name}: n {len(sel)}, correct AVX2 {sum(r[1] == r[2] for r in sel)}, AVX-512 {sum(r[1] == r[3] for r in sel)}, "
          f"changed {sum(r[2] != r[3] for r in sel)}")
changed = [r for r in rows if r[2] != r[3]]
gain = sum(r[1] == r[3] for r in changed)
loss = sum(r[1] == r[2] for r in changed)
print(f"changed predictions: {len(changed)}; right only on AVX-512 {gain}, right only on AVX2 {loss}; "
      f"median AVX2 margin of the changed {sorted(r[4] for r in changed)[len(changed) // 2] if changed else 0:.3f}, "
      f"of all {sorted(r[4] for r in rows)[len(rows) // 2]:.3f}")
