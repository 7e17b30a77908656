#!/bin/sh
# Dev check of formulate.llm_reformulation_max_question_tokens = 96: the first 30 of xmedbench_dev
# MedQA-USMLE's seeded 40 (the questions of bench/results/reformulate-cut-dev), medr2 with loglik
# answers on the evaluation index. Dev data only: never the seeded evaluation subsets.
set -e
cd "$(dirname "$0")/../../.."
HERE=bench/results/reformulate-long-dev
mkdir -p /tmp/rld
.venv/bin/medr2 eval run --dataset ../shared/data/benchmarks/xmedbench_dev/en/medqa-usmle.jsonl:40 --limit 30 \
  --method medr2 --answer-mode loglik --index bench/out/eval/index --config $HERE/offline-long.toml --out $HERE/offline-long --no-progress
