#!/bin/sh
# Thin contexts on dev (issue 35): on the report cells medr2's generated answers fell behind
# vanilla RAG's only where its context held at most one passage (bench/README.md). A rule for such
# contexts is chosen here, on dev data only: the gate-dev questions (xmedbench_dev) whose vanilla
# RAG context held at most one passage over the relevance floor (select.py -> ids-<set>.txt),
# answered by medr2 (generated, the shipped "after" rationale, bench/eval.toml) as it is and with
# the floor off (floor0.toml). The answers without evidence and with vanilla RAG's context are
# bench/results/gate-dev-generated's. Resumable: rerun to continue.
set -e
cd "$(dirname "$0")/../../../.."
HERE=bench/results/eval/thin-dev
DEV=../shared/data/benchmarks/xmedbench_dev/en
.venv/bin/python $HERE/select.py
for variant in floor floor0; do
  cfg=bench/eval.toml; [ $variant = floor0 ] && cfg=$HERE/floor0.toml
  for set in medqa-usmle pubmedqa mmlu-medical medmcqa; do
    .venv/bin/medr2 eval run --dataset $DEV/$set.jsonl:40 --ids $HERE/ids-$set.txt --method medr2 \
      --answer-mode generate --index bench/out/eval/index --config $cfg --out $HERE/$variant --progress
  done
done
