"""Which dev questions would give medr2 a thin context (issue 35, thin-dev/run.sh): the gate-dev
questions (xmedbench_dev, bench/results/gate-dev) whose vanilla RAG context holds at most one
passage with calibrated relevance >= 0.02 (appraise.relevance_floor), the passages medr2's fine
stage keeps. Reads committed dev records only; writes ids-<set>.txt beside this file."""

import json
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEV = HERE.parents[1] / "gate-dev"
FLOOR = 0.02

ids = defaultdict(list)
for f in sorted(DEV.glob("*/vanilla_rag+loglik/*/*.json")):
    if f.name == "manifest.json":
        continue
    r = json.loads(f.read_text())
    r = r[1] if isinstance(r, list) else r
    if sum((c.get("relevance") or 0) >= FLOOR for c in r["context"]) <= 1:
        ids[f.parts[-4]].append(r["id"])
for s, xs in sorted(ids.items()):
    (HERE / f"ids-{s}.txt").write_text("".join(x + "\n" for x in sorted(xs)))
    print(s, len(xs))
