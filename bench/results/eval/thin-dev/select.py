"""Which dev questions would give medr2 a thin context (issue 35, thin-dev/run.sh).

    python select.py           # ids-<set>.txt: the gate-dev questions (xmedbench_dev,
                               # bench/results/gate-dev) whose vanilla RAG context holds at most one
                               # passage with calibrated relevance >= 0.02 (appraise.relevance_floor)
    python select.py --thin    # ids-thin-<set>.txt: of those, the ones where medr2's own context
                               # (floor/, answered from ids-<set>.txt) held at most one passage

Reads committed dev records only."""

import json
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEV = HERE.parents[1] / "gate-dev"
FLOOR = 0.02

SETS = ("medqa-usmle", "pubmedqa", "mmlu-medical", "medmcqa")
THIN = "--thin" in sys.argv[1:]
ids = defaultdict(list)
for f in sorted((HERE / "floor").glob("*/medr2/*/*.json") if THIN else DEV.glob("*/vanilla_rag+loglik/*/*.json")):
    if f.name == "manifest.json":
        continue
    r = json.loads(f.read_text())
    r = r[1] if isinstance(r, list) else r
    if (len(r["context"]) if THIN else sum((c.get("relevance") or 0) >= FLOOR for c in r["context"])) <= 1:
        ids[f.parts[-4]].append(r["id"])
for s in SETS:  # every set gets its file, empty when none (run.sh skips an empty one)
    xs = ids.get(s, [])
    (HERE / f"ids-{'thin-' if THIN else ''}{s}.txt").write_text("".join(x + "\n" for x in sorted(xs)))
    print(s, len(xs))
