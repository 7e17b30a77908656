#!/bin/sh
# The fresh English gate pool (PLAN.md): vanilla RAG in loglik mode from the evaluation index
# (bench/out/eval/index; `python bench/eval.py` builds it), the gate recording both option
# distributions and the relevance (bench/gate_dev.toml). Build the pool first:
# `python bench/gate_dev_en2.py`. Rounds of 20 per set, so that a stopped run leaves every set
# answered as far; resumable: rerun to continue. SETS picks the sets.
set -e
cd "$(dirname "$0")/../../.."
for n in 20 40 60 80; do
  for set in ${SETS:-mmlu medqa medmcqa pubmedqa}; do
    .venv/bin/medr2 eval run --dataset $set --benchmark bench/out/gate-dev-en2/benchmark.json --limit $n \
      --method ${METHOD:-vanilla_rag} --answer-mode loglik --index bench/out/eval/index --config bench/gate_dev.toml \
      --out bench/results/gate-dev-en2 --progress
  done
done
