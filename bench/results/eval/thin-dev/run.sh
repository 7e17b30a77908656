#!/bin/sh
# Thin contexts on dev (issue 35): on the report cells medr2's generated answers fell behind
# vanilla RAG's only where its context held at most one passage (bench/README.md). A rule for such
# contexts is chosen here, on dev data only: the gate-dev questions (xmedbench_dev) whose vanilla
# RAG context held at most one passage over the relevance floor (select.py -> ids-<set>.txt),
# answered by medr2 (generated, the shipped "after" rationale, bench/eval.toml) as it is (floor/);
# then those where medr2's own context was that thin (select.py --thin -> ids-thin-<set>.txt)
# with the floor off (floor0.toml; floor0/ also holds 7 questions answered before the list was
# narrowed). The answers without evidence and with vanilla RAG's context are
# bench/results/gate-dev-generated's. compare.py -> thin-dev.md. Resumable: rerun to continue.
set -e
cd "$(dirname "$0")/../../../.."
HERE=bench/results/eval/thin-dev
DEV=../shared/data/benchmarks/xmedbench_dev/en
SETS="medqa-usmle pubmedqa mmlu-medical medmcqa"
.venv/bin/python $HERE/select.py
for set in $SETS; do
  [ -s $HERE/ids-$set.txt ] || continue
  .venv/bin/medr2 eval run --dataset $DEV/$set.jsonl:40 --ids $HERE/ids-$set.txt --method medr2 \
    --answer-mode generate --index bench/out/eval/index --config bench/eval.toml --out $HERE/floor --progress
done
.venv/bin/python $HERE/select.py --thin
for set in $SETS; do
  [ -s $HERE/ids-thin-$set.txt ] || continue  # no thin context in this set
  .venv/bin/medr2 eval run --dataset $DEV/$set.jsonl:40 --ids $HERE/ids-thin-$set.txt --method medr2 \
    --answer-mode generate --index bench/out/eval/index --config $HERE/floor0.toml --out $HERE/floor0 --progress
done
.venv/bin/python $HERE/compare.py
