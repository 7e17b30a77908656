#!/bin/sh
# Dev check of appraise.usefulness_languages = ["en"] (bench/README.md, CPU speed): MedQA-MCMLE's
# questions outside the seeded evaluation 100 (71 of xmedbench_dev/zh/medqa-mcmle.jsonl) are the dev
# pool; its first 30 in the seeded answer order, medr2 with loglik answers on the Chinese evaluation
# index, the usefulness proxy reading Chinese (every-language: the old behaviour) and not (en-only).
set -e
cd "$(dirname "$0")/../../.."
HERE=bench/results/usefulness-language-dev
DEV=bench/out/eval/mcmle-dev.jsonl
.venv/bin/python - <<'PY'
import json
from medr2.eval.datasets import load_xmedbench
from medr2.eval.runner import subset
src = "../shared/data/benchmarks/xmedbench_dev/zh/medqa-mcmle.jsonl"
held = {q.id for q in subset(list(load_xmedbench(src)), 100, 0)}
lines = open(src, encoding="utf-8").read().splitlines()
keep = [l for n, l in enumerate(lines, 1) if l.strip() and f"medqa-mcmle-{n}" not in held]
open("bench/out/eval/mcmle-dev.jsonl", "w", encoding="utf-8").write("\n".join(keep) + "\n")
print(f"{len(keep)} dev questions (of {len(lines)}; {len(held)} held for evaluation)")
PY
for v in every-language en-only; do
  .venv/bin/medr2 eval run --dataset $DEV:71 --limit 30 --method medr2 --answer-mode loglik \
    --index bench/out/eval/index-zh --config $HERE/$v.toml --out $HERE/$v --no-progress
done
