#!/bin/sh
# The generated before/after (bench/README.md, CPU speed): 10 seeded questions each of MedQA-US,
# PubMedQA* and BioASQ-Y/N, medr2 with generated answers; before on the baseline llama.cpp build
# (a wheel built with MEDR2_LLAMA_BASELINE=1 flags, installed with --target in $LLAMA_BASELINE_DIR).
set -e
cd "$(dirname "$0")/../../../.."
HERE=bench/results/eval/generate-before-after
PYTHONPATH=${LLAMA_BASELINE_DIR:?the baseline build} .venv/bin/python bench/eval.py --phase medr2 --answer-mode generate \
  --datasets medqa,pubmedqa,bioasq --limit 10 --config $HERE/before.toml --runs $HERE/before
.venv/bin/python bench/eval.py --phase medr2 --answer-mode generate \
  --datasets medqa,pubmedqa,bioasq --limit 10 --config $HERE/after.toml --runs $HERE/after
