#!/bin/sh
# Dev choice of formulate.retry_cut_reformulation: the first 30 of xmedbench_dev MedQA-USMLE's
# seeded 40, medr2 with loglik answers on the evaluation index, the new default (fallback) and the
# old behaviour (retry), one after the other. Dev data only: never the seeded evaluation subsets.
set -e
cd "$(dirname "$0")/../../.."
HERE=bench/results/reformulate-cut-dev
for v in fallback retry; do
  .venv/bin/medr2 eval run --dataset ../shared/data/benchmarks/xmedbench_dev/en/medqa-usmle.jsonl:40 --limit 30 \
    --method medr2 --answer-mode loglik --index bench/out/eval/index --config $HERE/$v.toml --out $HERE/$v --no-progress
done
