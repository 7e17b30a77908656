#!/bin/sh
# The live rerun of the loglik grid behind the evidence gate (issue 35; bench/README.md, "Evidence
# gate"): the current pipeline (reranker v2.1, the gate chosen on dev data, the
# AVX-512 llama.cpp build) on the same seeded 100 per set as bench/results/eval/runs.
# Direct answering first (every set), then medr2, vanilla RAG and the single modules in rounds of
# ROUND questions per set, so a stopped run has the same questions answered by both methods on every set (the answering
# order is the same seeded shuffle). Resumable: rerun to continue. MedQA-MCMLE's retrieving runs
# come last: its Chinese index (bench/out/eval/index-zh) takes long to build the first time.
set -e
cd "$(dirname "$0")/../../../.."
RUNS=bench/results/eval/runs-gated
ROUND=${ROUND:-10}
SETS=${SETS:-mmlu,medqa,medmcqa,pubmedqa,bioasq}
.venv/bin/python bench/eval.py --phase direct --runs $RUNS
# --limit N answers the first N of each seeded subset (its file order); a larger N continues
# FROM=R starts at round R (the rounds before it done); ROUND=5 FROM=12 goes 60, 65, ... 100
# rounds FROM, FROM+1, ... until every question of the subset is in (N = r x ROUND >= 100)
r=${FROM:-1}
while [ $(((r - 1) * ROUND)) -lt 100 ]; do
  N=$((r * ROUND))
  .venv/bin/python bench/eval.py --phase medr2 --datasets $SETS --limit $N --runs $RUNS
  .venv/bin/python bench/eval.py --phase rag --datasets $SETS --limit $N --runs $RUNS
  # the single modules (+reformulator, +reranker; loglik has no +reformulator+reranker) up to ABL_MAX
  if [ "$N" -le "${ABL_MAX:-100}" ]; then
    .venv/bin/python bench/eval.py --phase ablations --datasets $SETS --limit $N --runs $RUNS
  fi
  r=$((r + 1))
done
