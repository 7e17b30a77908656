#!/bin/sh
# Issue 35's second index: vanilla RAG and medr2 (loglik, the gated grid's settings, bench/eval.toml)
# retrieving from bench/out/eval/index-extended (the default index plus the other corpora of
# ../shared/data: both OpenStax textbooks whole, every MedQuAD answer, the 299 PubMed abstracts,
# Apollo's English book / guideline / paper / wiki answers, guideline chunks, case reports; built
# on first use by bench/eval.py, `extended_index`). Direct answering reads no index: its records
# are runs-gated's. Rounds of ROUND questions per set, the same seeded order as runs-gated, so
# each round is paired with it question for question. Resumable: rerun to continue.
set -e
cd "$(dirname "$0")/../../../.."
RUNS=bench/results/eval/runs-gated-ext
ROUND=${ROUND:-10}
SETS=${SETS:-mmlu,medqa,medmcqa,pubmedqa,bioasq}
for r in 1 2 3 4 5 6 7 8 9 10; do
  N=$((r * ROUND))
  .venv/bin/python bench/eval.py --phase medr2 --extended-index --datasets $SETS --limit $N --runs $RUNS
  .venv/bin/python bench/eval.py --phase rag --extended-index --datasets $SETS --limit $N --runs $RUNS
done
