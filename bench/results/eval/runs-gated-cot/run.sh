#!/bin/sh
# The generated chain-of-thought cells of issue 35 (section 3): 30 seeded questions of MedQA-US,
# PubMedQA* and BioASQ-Y/N (`--n 30`: a seeded random sample of each set, not a file-order prefix),
# answered with a generated chain of thought by direct answering (MIRAGE's CoT prompt, direct_cot),
# vanilla RAG and medr2, with the same settings as the loglik grid beside it (bench/eval.toml, the
# evidence gate). About 15-40 s a question on 2 cores. Resumable: rerun to continue; rounds of
# ROUND questions per set keep the three methods on the same questions when it is stopped.
set -e
cd "$(dirname "$0")/../../../.."
RUNS=bench/results/eval/runs-gated-cot
ROUND=${ROUND:-10}
SETS=medqa,pubmedqa,bioasq
for r in 1 2 3; do
  N=$((r * ROUND))
  for phase in cot rag medr2; do
    .venv/bin/python bench/eval.py --phase $phase --answer-mode generate --n 30 --datasets $SETS --limit $N --runs $RUNS
  done
done
