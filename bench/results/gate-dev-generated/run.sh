#!/bin/sh
# Dev data for the evidence gate in generated mode (issue 35, gate.generated_weight): the 125
# xmedbench_dev questions of bench/results/gate-dev (seeded :40 subsets, first 30 in file order;
# MedQA-USMLE 35), answered here
#   - by direct answering, generated (the letter the model writes without evidence),
#   - by vanilla RAG, generated, with the gate recording only (plain RAG: the letter it writes
#     with the evidence);
# the option distributions without and with the evidence, and the context's best relevance, are
# those of bench/results/gate-dev (vanilla RAG in loglik mode, the same contexts).
# `python bench/tune_gate.py --generated` replays the generated gate over them (never over the
# report subsets). Resumable: rerun to continue.
set -e
cd "$(dirname "$0")/../../.."
HERE=bench/results/gate-dev-generated
DEV=../shared/data/benchmarks/xmedbench_dev/en
for method in direct vanilla_rag; do
  for set in medqa-usmle pubmedqa mmlu-medical medmcqa; do
    n=30; [ $set = medqa-usmle ] && n=35
    .venv/bin/medr2 eval run --dataset $DEV/$set.jsonl:40 --limit $n --method $method --answer-mode generate \
      --index bench/out/eval/index --config bench/gate_dev.toml --out $HERE --progress
  done
done
