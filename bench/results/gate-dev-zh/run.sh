#!/bin/sh
# Dev data for the evidence gate on Chinese questions (issue 35): MedQA-MCMLE's retrieving cells
# lost to direct answering behind the English-chosen gate, so the Chinese weight is chosen on
# Chinese dev pools that are never reported: xmedbench_dev/zh's CMB-single, CMExam and
# CMMLU-medical (seeded :40 subsets, the first 30 of each in file order), answered by vanilla RAG
# in loglik mode from the Chinese index (bench/out/eval/index-zh, `python bench/eval.py` builds it)
# with the gate recording both option distributions (bench/gate_dev.toml).
# `python bench/tune_gate.py bench/results/gate-dev-zh/*/*/*` replays every weight over them.
# METHOD=medr2 answers them with the full pipeline (the same settings). With
# CONFIG=bench/results/gate-dev-zh-reads-all/reads-all.toml OUT=bench/results/gate-dev-zh-reads-all
# it runs as medr2 did before rerank.max_unknown_share (the English cross-encoder scoring Chinese
# text): the "before" side of that change; the vanilla RAG records there are this script's first run.
# Resumable: rerun to continue.
set -e
cd "$(dirname "$0")/../../.."
HERE=${OUT:-bench/results/gate-dev-zh}
DEV=../shared/data/benchmarks/xmedbench_dev/zh
for set in cmb-single cmexam cmmlu-medical; do
  .venv/bin/medr2 eval run --dataset $DEV/$set.jsonl:40 --limit ${N:-30} --method ${METHOD:-vanilla_rag} --answer-mode loglik \
    --index bench/out/eval/index-zh --config ${CONFIG:-bench/gate_dev.toml} --out $HERE --progress
done
