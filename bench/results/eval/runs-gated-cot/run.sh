#!/bin/sh
# The generated chain-of-thought cells of issue 35 (section 3): 30 seeded questions of MedQA-US,
# PubMedQA* and BioASQ-Y/N (`--n 30`: a seeded random sample of each set, not a file-order prefix),
# answered with a generated chain of thought by direct answering (MIRAGE's CoT prompt, direct_cot),
# vanilla RAG with a chain of thought (+cot; vanilla_rag itself answers with an empty chain, the
# no-CoT row) and medr2, with the same settings as the loglik grid beside it (bench/eval.toml, the
# evidence gate), with the rationale before the letter (bench/eval-cot.toml pins
# apply.choice_rationale = "before"; the shipped default is "after", runs-gated-cot-after/).
# About 15-40 s a question on 2 cores. Resumable: rerun to continue; rounds of ROUND questions per
# set keep the methods on the same questions when it is stopped.
set -e
cd "$(dirname "$0")/../../../.."
RUNS=bench/results/eval/runs-gated-cot
ROUND=${ROUND:-10}
SETS=medqa,pubmedqa,bioasq
for r in 1 2 3; do
  N=$((r * ROUND))
  for phase in cot rag rag_cot medr2; do
    .venv/bin/python bench/eval.py --phase $phase --answer-mode generate --n 30 --datasets $SETS --limit $N --runs $RUNS --config bench/eval-cot.toml
  done
done
# the direct baselines on the same 30 questions: log-likelihood letters (the grid's mode) and a
# generated letter without a chain of thought (direct); compare with
#   python bench/where_evidence_helps.py --runs bench/results/eval/runs-gated-cot --mode '' \
#     --methods vanilla_rag,medr2 --bases direct_cot,direct,direct+loglik,vanilla_rag
.venv/bin/python bench/eval.py --phase direct --n 30 --datasets $SETS --runs $RUNS --config bench/eval-cot.toml
.venv/bin/python bench/eval.py --phase direct --answer-mode generate --n 30 --datasets $SETS --runs $RUNS --config bench/eval-cot.toml
