#!/bin/sh
# medr2's generated answers with the shipped apply.choice_rationale = "after" (the letter as
# without a chain of thought, then its explanation) on the same 30-question samples as the
# chain-of-thought cells (runs-gated-cot: MedQA-US, PubMedQA*, BioASQ, `--n 30`), in rounds of 10
# per set. The baselines are runs-gated-cot's (direct, vanilla RAG, direct_cot, +cot; methods
# without a chain of thought do not read the setting). runs-gated-cot-after-v1/: the same, answered
# before a review fix of the citations (bench/README.md). Resumable: rerun to continue.
set -e
cd "$(dirname "$0")/../../../.."
RUNS=bench/results/eval/runs-gated-cot-after
for N in 10 20 30; do
  .venv/bin/python bench/eval.py --phase medr2 --answer-mode generate --n 30 --datasets medqa,pubmedqa,bioasq \
    --limit $N --runs $RUNS
done
