"""Where retrieval helps and where it hurts (issue 35): each retrieving method against direct
answering and against vanilla RAG, question for question, by dataset, by EBM category and by
question type (the offline classifier and the cue rules medr2's formulate stage uses; English
sets only, MedQA-MCMLE's Chinese questions are grouped by dataset alone).

Reads committed run records only (no model call):

    python bench/where_evidence_helps.py                                   # the committed grid
    python bench/where_evidence_helps.py --runs bench/results/eval/runs-gated --out bench/results/where-gated.md
    python bench/where_evidence_helps.py --runs bench/results/eval/runs-gated-cot --mode '' \
        --methods vanilla_rag,medr2 --bases direct_cot,direct,direct+loglik,vanilla_rag   # the CoT cells
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
SHARED = Path(os.environ.get("MEDR2_SHARED_DATA") or ROOT.parent / "shared" / "data")
MIRAGE = SHARED / "benchmarks" / "mirage" / "benchmark.json"
MCMLE = SHARED / "benchmarks" / "xmedbench_dev" / "zh" / "medqa-mcmle.jsonl"


def questions(datasets: set[str]) -> dict[tuple[str, str], str]:
    """(dataset directory, question id) -> question text."""
    from medr2.eval.datasets import load_mirage, load_xmedbench

    out: dict[tuple[str, str], str] = {}
    mirage = sorted(d for d in datasets if d in ("mmlu", "medqa", "medmcqa", "pubmedqa", "bioasq"))
    if mirage:
        for q in load_mirage(MIRAGE, mirage):
            out[(q.dataset, q.id)] = q.question
    if "medqa-mcmle" in datasets:
        for q in load_xmedbench(MCMLE):
            out[("medqa-mcmle", q.id)] = q.question
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=Path, nargs="*", default=[ROOT / "bench" / "results" / "eval" / "runs"])
    ap.add_argument("--methods", default="vanilla_rag,+reformulator,+reranker,medr2")
    ap.add_argument("--datasets", default="mmlu,medqa,medmcqa,pubmedqa,bioasq,medqa-mcmle",
                    help="dataset directories compared (the grid's six sets)")
    ap.add_argument("--mode", default="+loglik", help="answer-mode suffix of the method directories ('' for "
                    "generated answers)")
    ap.add_argument("--bases", default="direct,vanilla_rag", help="the baselines each method is compared with "
                    "(the mode suffix is added; e.g. direct_cot,direct,direct+loglik,vanilla_rag with --mode '')")
    ap.add_argument("--min-n", type=int, default=8, help="smallest group shown")
    ap.add_argument("--out", type=Path, help="also write the tables here")
    args = ap.parse_args()
    from medr2.eval.breakdown import group_table, paired_by_group
    from medr2.eval.report import collect
    from medr2.formulate.classify import OfflineClassifier

    _, meta = collect(args.runs)
    marks = meta["marks"]  # (dataset, method, model) -> {id: right}
    datasets = {d for d, _, _ in marks} & set(args.datasets.split(","))
    text = questions(datasets)
    clf = OfflineClassifier.load()
    category, qtype = {}, {}
    for (d, i), q in text.items():
        if d == "medqa-mcmle":
            continue
        c = clf.classify(q)
        category[(d, i)], qtype[(d, i)] = c.ebm_category, c.question_type
    models = sorted({mo for _, _, mo in marks})
    out = [f"Runs: {', '.join(str(r.relative_to(ROOT)) if r.is_relative_to(ROOT) else str(r) for r in args.runs)}; "
           f"groups of at least {args.min_n} questions; exact McNemar; 'helps' / 'hurts' at p < 0.05."]
    for mo in models:
        for meth in [m + args.mode for m in args.methods.split(",")]:
            for base in [b if b.endswith(("+loglik", "+loglik-cal")) else b + args.mode for b in args.bases.split(",")]:
                if base == meth:
                    continue
                pairs = [(d, marks[(d, meth, mo)], marks[(d, base, mo)]) for d in sorted(datasets)
                         if (d, meth, mo) in marks and (d, base, mo) in marks]
                if not pairs:
                    continue
                # pooled over the datasets: question keys are (dataset, id)
                m_all = {(d, i): v for d, m, _ in pairs for i, v in m.items()}
                b_all = {(d, i): v for d, _, b in pairs for i, v in b.items()}
                by_set = paired_by_group(m_all, b_all, {k: k[0] for k in m_all}, 1)
                by_cat = paired_by_group(m_all, b_all, category, args.min_n)[1:]
                by_type = paired_by_group(m_all, b_all, qtype, args.min_n)[1:]
                by_set_cat = paired_by_group(m_all, b_all, {k: f"{k[0]} / {v}" for k, v in category.items()},
                                             args.min_n)[1:]
                out.append(f"\n### {meth} against {base} ({mo})\n")
                out.append(group_table(by_set, "dataset"))
                out.append("\nBy EBM category (English sets pooled):\n")
                out.append(group_table(by_cat, "EBM category"))
                out.append("\nBy question type (English sets pooled):\n")
                out.append(group_table(by_type, "question type"))
                out.append("\nBy dataset and EBM category:\n")
                out.append(group_table(by_set_cat, "dataset / category"))
    text_out = "\n".join(out)
    print(text_out)
    if args.out:
        args.out.write_text(text_out + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
