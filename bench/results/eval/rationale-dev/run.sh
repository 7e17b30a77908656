#!/bin/sh
# Dev choice of apply.choice_rationale (issue 35): where a multiple-choice answer's rationale goes
# with the bundled generator. Dev data only: seeded 20-question subsets of xmedbench_dev's four
# English sets (never the MIRAGE subsets the grid reports). Generated answers of direct_cot (the
# rationale before the letter: a chain of thought) and direct (no rationale; "after" gives the
# same letter by construction, then explains it), and direct_cot with "after" on PubMedQA as the
# check of that. Resumable: rerun to continue. after-schema-order/: an abandoned first design
# (one reply, the letter before the rationale, under a changed prompt).
set -e
cd "$(dirname "$0")/../../../.."
HERE=bench/results/eval/rationale-dev
DEV=../shared/data/benchmarks/xmedbench_dev/en
run() {  # set method config out
  .venv/bin/medr2 eval run --dataset $DEV/$1.jsonl:20 --method $2 --index bench/out/eval/index \
    --config $HERE/$3.toml --answer-mode generate --out $HERE/$4 --progress
}
for set in medqa-usmle pubmedqa mmlu-medical medmcqa; do
  run $set direct_cot before before
  run $set direct before before
done
run pubmedqa direct_cot after after
