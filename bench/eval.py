"""The published evaluation runs (evaluation issue, section 5): a fixed, seeded subset of each
benchmark answered by each method, then `medr2 eval report` over all of them.

Every (method, dataset) pair is one `medr2 eval run` process, in the order given, so an
interrupted grid resumes where it stopped (answered questions are files) and one failing pair
does not stop the others. The per-question records go to ``bench/results/eval/runs`` and the
trust rows to ``bench/results/eval/trust``, both committed: a later session (a fresh checkout)
resumes a partial run and regenerates the report from every run so far. Indexes and model
caches stay in ``bench/out/eval`` (not committed; rebuilt from ../shared/data).

    python bench/eval.py --phase direct            # direct answering, every dataset
    python bench/eval.py --phase rag --datasets mmlu,pubmedqa
    python bench/eval.py --phase amt --datasets mmlu  # the LLM-AMT-style baseline
    python bench/eval.py --phase ablations --methods +reformulator --datasets medqa
    python bench/eval.py --phase medr2 --order paper  # the paper's F order (appraise.order), own runs
    python bench/eval.py --phase trust             # trust metrics on bench/data/ngc_questions.jsonl
    python bench/eval.py --phase report            # bench/results/eval/report.md + PNGs
    python bench/eval.py --phase mirage            # re-score MIRAGE's stored predictions

The index is the retrieval benchmark's default index (`python bench/retrieval.py` builds it):
NGC guideline summaries, OpenStax textbooks, MedQuAD answers, MedlinePlus topics and the 1,000
PubMedQA abstracts, of which each PubMedQA question's own abstract is excluded from retrieval.
MedQA-MCMLE (Chinese) retrieves from ``bench/out/eval/index-zh``, built once from the shared
Chinese corpora (``zh_index``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MEDR2_SHARED_DATA") or ROOT.parent / "shared" / "data")
OUT = ROOT / "bench" / "out" / "eval"  # indexes and corpora built from ../shared/data
RESULTS = ROOT / "bench" / "results" / "eval"  # committed: run records, trust rows, the report
MIRAGE = SHARED / "benchmarks" / "mirage" / "benchmark.json"
NGC = SHARED / "corpora" / "guidelines" / "ngc_summaries.jsonl"
TRUST_QUESTIONS = ROOT / "bench" / "data" / "ngc_questions.jsonl"
MCMLE = SHARED / "benchmarks" / "xmedbench_dev" / "zh" / "medqa-mcmle.jsonl"
DATASETS = {"mmlu": "mmlu", "medqa": "medqa", "medmcqa": "medmcqa", "pubmedqa": "pubmedqa", "bioasq": "bioasq",
            "mcmle": str(MCMLE)}
PHASES = {
    "direct": ["direct"],
    "cot": ["direct_cot"],
    "rag": ["vanilla_rag"],
    "rag_cot": ["+cot"],  # vanilla RAG with a chain of thought (the generated CoT cells' like-for-like row)
    "medr2": ["medr2"],
    "ablations": ["+reformulator", "+reranker", "+reformulator+reranker"],
    "amt": ["llm_amt"],
}
# The methods with Med-R2's fine rerank: only they read appraise.order ("relevance" by default;
# "paper" = F alone, the ablation row). Their paper-order runs go to their own run directory.
FINE_RERANK = ("+reranker", "+reformulator+reranker", "medr2")
ORDER_RUNS = RESULTS / "runs-order-paper"
ORDER_REPORT = RESULTS / "order-paper"


def order_config(base: Path, order: str) -> Path:
    """``base`` with ``appraise.order = ORDER`` (written under bench/out/eval); ``base`` itself
    for the default order."""
    if order == "relevance":
        return base
    text = base.read_text(encoding="utf-8")
    if "order" in tomllib.loads(text).get("appraise", {}):
        sys.exit(f"{base} sets appraise.order already; give --order relevance with it")
    lines = text.splitlines()
    if "[appraise]" in (x.strip() for x in lines):
        at = next(i for i, x in enumerate(lines) if x.strip() == "[appraise]")
        lines.insert(at + 1, f'order = "{order}"')
    else:
        lines += ["", "[appraise]", f'order = "{order}"']
    out = OUT / f"{base.stem}-order-{order}.toml"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def medr2(*args: str) -> list[str]:
    return [str(ROOT / ".venv" / "bin" / "medr2"), *args]


def ensure_index(index: Path) -> None:
    if (index / "store.sqlite").exists():
        return
    src = ROOT / "bench" / "out" / "default" / "index"
    if not (src / "store.sqlite").exists():
        sys.exit(f"no evaluation index at {index} and no retrieval-benchmark index at {src}: "
                 "run `python bench/retrieval.py` first (it builds the corpus index)")
    shutil.copytree(src, index)


ZH = SHARED / "corpora" / "chinese"
MIXED = SHARED / "corpora" / "mixed_samples"
# Apollo's Chinese samples by the source type medr2 appraises them as (Medical_Exam is left out:
# exam items could hold MCMLE's own questions).
ZH_MIXED = {"Book": "book", "Guideline": "guideline", "Paper": "paper", "Wiki": "entry"}


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def apollo_rows(name: str, lang: str) -> list[dict]:
    """Apollo's sampled question / answer pairs of one source ("Book", "Wiki", ...) in one language
    ("en", "zh") as id / title / text rows, the question first ("Q: ... A: ..." or "问：...答：...")."""
    pairs = json.loads((MIXED / f"Medical_{name}_{lang}_sampled.json").read_text(encoding="utf-8"))
    q_mark, a_mark, title_len = ("问：", "答：", 60) if lang == "zh" else ("Q: ", "A: ", 200)
    return [{"id": f"apollo-{name.lower()}-{lang}-{i}", "title": q.strip().splitlines()[0][:title_len],
             "text": f"{q_mark}{q.strip()}\n{a_mark}{a.strip()}"} for i, (q, a) in enumerate(pairs)]


def zh_index() -> Path:
    """The Chinese index MCMLE retrieves from (the English index holds no Chinese passage): Apollo's
    Chinese book / guideline / paper / wiki answers, the liver-cancer literature dialogues and the
    GB/T 16751 TCM clinical terms, from ../shared/data. A record sharing an MCMLE question's first
    20 characters is dropped, so no question retrieves itself. Built once."""
    index = OUT / "index-zh"
    if (index / "zh-built-e5").exists():
        return index
    if index.exists():  # an older build (English MiniLM vectors, the terms standard without its outline)
        shutil.rmtree(index)
    stems = [json.loads(x)["question"].strip()[:20] for x in MCMLE.read_text(encoding="utf-8").splitlines() if x.strip()]
    stems = [x for x in stems if len(x) >= 10]
    src = OUT / "zh-corpus"
    src.mkdir(parents=True, exist_ok=True)
    dropped = 0
    files: list[tuple[Path, str]] = []
    for name, stype in ZH_MIXED.items():
        rows = apollo_rows(name, "zh")
        kept = [r for r in rows if not any(x in r["text"] for x in stems)]
        dropped += len(rows) - len(kept)
        files.append((write_jsonl(src / f"apollo_{name.lower()}_zh.jsonl", kept), stype))
    liver = []
    for i, r in enumerate(json.loads((ZH / "data-literature_liver_cancer.json").read_text(encoding="utf-8"))):
        talk = " ".join(r["instruction"].replace("<user>:", "问：").replace("<bot>:", "答：").split())
        liver.append({"id": f"liver-cancer-{i}", "title": "肝癌文献问答", "text": f"{talk}\n答：{r['output'].strip()}"})
    files.append((write_jsonl(src / "liver_cancer_zh.jsonl", liver), "paper"))
    # Dense vectors from the bundled multilingual-e5-small (MiniLM is English-only). The terms
    # standard is one 40,000-line document; its numbered outline (3 parts, 33 chapters, 3,951 term
    # entries) gives Med-R2's units, so its default truncation of units over 10,000 tokens keeps
    # every entry (3,986 of 3,987 headed sections) and cuts only the unnumbered pinyin / stroke /
    # English indices that close each part (dot-leader lists, noise to retrieval).
    zh_cfg = src / "zh.toml"
    zh_cfg.write_text('[dense]\nmodel = "bundled:multilingual-e5-small"\n', encoding="utf-8")
    files.append((ZH / "tcm_terminology_gbt16751", "book"))
    t = time.time()
    for f, stype in files:
        subprocess.check_call(medr2("ingest", str(f), "--index", str(index), "--source-type", stype,
                                    "--config", str(zh_cfg), "--progress"))
    (index / "zh-built-e5").write_text(f"Chinese corpus: {len(files)} sources, {dropped} records dropped as "
                                    f"MCMLE overlap, built in {time.time() - t:.0f} s\n")
    return index


TEXTBOOKS = SHARED / "corpora" / "textbooks"
# Apollo's English samples added to the second index by source type (Medical_Exam is left out, as
# for the Chinese index: exam items could be the evaluation questions themselves).
EN_MIXED = {"Book": "book", "Guideline": "guideline", "Paper": "paper", "Wiki": "entry"}


def mirage_stems(n: int = 40) -> set[str]:
    """The first N characters (lower-cased) of every MIRAGE question of the five English sets and of
    every PubMedQA abstract section, less those that start two or more of them (generic openings):
    a corpus record holding one is an evaluation question's own source and stays out."""
    bench = json.loads(MIRAGE.read_text(encoding="utf-8"))
    texts = [q["question"] for qs in bench.values() for q in qs.values()]
    # PubMedQA's abstracts too: the default index holds them and leaves each question's own out at
    # retrieval time (by its PMID), which a copy of the abstract under another id would escape
    pqal = json.loads((SHARED / "benchmarks" / "pubmedqa" / "ori_pqal.json").read_text(encoding="utf-8"))
    texts += [c for r in pqal.values() for c in r["CONTEXTS"]]
    counts = Counter(" ".join(t.lower().split())[:n] for t in texts)
    # a start shared by two questions ("which of the following is the most likely ") names no source
    return {x for x, c in counts.items() if len(x) >= n and c == 1}


def extended_corpus(folder: Path, default_corpus: Path) -> list[tuple[Path, str]]:
    """The corpora of ../shared/data that the default index leaves out (issue 35's second index):
    both OpenStax textbooks whole (Anatomy and Physiology 2e; Microbiology beyond its first 60
    modules), every MedQuAD answer, the 299 PubMed abstracts, Apollo's English book / guideline /
    paper / wiki answers, the raw guideline chunks and the case reports. MedMCQA's explanations
    and Apollo's exam items are not added (they are, or may be, the evaluation questions' own
    sources), nor any record that holds the start of a MIRAGE question or PubMedQA abstract. Returns (file, source
    type) pairs; the default index's documents are not repeated (same doc ids: unchanged, skipped)."""
    folder.mkdir(parents=True, exist_ok=True)
    stems = mirage_stems()

    def holds_question(text: str) -> bool:  # a question starts a word: look up the 40 characters at each word start
        t = " ".join(text.lower().split())
        return any(t[m.start():m.start() + 40] in stems for m in re.finditer(r"(?<!\S)\S", t))

    def clean(rows: list[dict]) -> list[dict]:
        kept = [r for r in rows if not holds_question(r["text"])]
        dropped[0] += len(rows) - len(kept)
        return kept

    dropped = [0]
    files = []
    for name in ("anatomy_physiology_2e", "microbiology"):  # OpenStax modules, filtered like the rest
        rows = [json.loads(x) for x in (TEXTBOOKS / f"{name}.jsonl").read_text(encoding="utf-8").splitlines() if x]
        files.append((write_jsonl(folder / f"openstax_{name}.jsonl", clean(rows)), "book"))
    default = [json.loads(x) for x in (default_corpus / "medquad_answers.jsonl").read_text().splitlines() if x]
    have = {r["id"] for r in default}
    in_default = {(r["id"], r["text"]) for r in default}
    medquad, more, first, seen_more = [], [], set(), {}
    with (SHARED / "corpora" / "medquad" / "medquad.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            if not r.get("answer", "").strip() or (r["qid"], r["answer"]) in in_default:
                continue
            row = {"id": r["qid"], "title": r["focus"], "text": r["answer"], "source_type": "entry"}
            # MedQuAD's qids repeat across its 12 collections: the first record of a qid keeps it, a
            # repeat (or a record sharing a qid with another one in the default index) is qualified
            # by its collection, in a file of its own
            if r["qid"] in have or r["qid"] in first:  # a qid can repeat inside a collection too: counted
                base = f"{r['qid']}@{r['collection']}"
                seen_more[base] = seen_more.get(base, 0) + 1
                more.append({**row, "id": base if seen_more[base] == 1 else f"{base}#{seen_more[base]}"})
            else:
                first.add(r["qid"])
                medquad.append(row)
    files.append((write_jsonl(folder / "medquad_rest.jsonl", clean(medquad)), "entry"))
    files.append((write_jsonl(folder / "medquad_more.jsonl", clean(more)), "entry"))
    abstracts = json.loads((SHARED / "corpora" / "pubmed" / "pubmed_abstracts_299.json").read_text(encoding="utf-8"))
    rows = [{"id": f"pubmed299-{i}", "title": a.strip().split("\n")[0][:200], "text": a.strip()}
            for i, a in enumerate(abstracts)]
    files.append((write_jsonl(folder / "pubmed_299.jsonl", clean(rows)), "paper"))
    for name, stype in EN_MIXED.items():
        files.append((write_jsonl(folder / f"apollo_{name.lower()}_en.jsonl", clean(apollo_rows(name, "en"))), stype))
    for name, src, stype in (("guideline_chunks", SHARED / "corpora" / "guidelines" / "raw_guideline_chunks_en.jsonl",
                              "guideline"), ("case_reports", MIXED / "case_reports_en.jsonl", "paper")):
        texts = [json.loads(x)[0].strip() for x in src.read_text(encoding="utf-8").splitlines() if x.strip()]
        rows = [{"id": f"{name}-{i}", "title": t.split("\n")[0][:120], "text": t} for i, t in enumerate(texts) if t]
        files.append((write_jsonl(folder / f"{name}.jsonl", clean(rows)), stype))
    print(f"second index: {dropped[0]} records dropped as holding a MIRAGE question or PubMedQA abstract", flush=True)
    return files


def extended_index() -> Path:
    """The second evaluation index (issue 35): the default one plus ``extended_corpus``. Built once
    (a copy of the default index, then one ``medr2 ingest`` a file, resumable)."""
    index = OUT / "index-extended"
    if (index / "extended-built").exists():
        return index
    if not (index / "store.sqlite").exists():
        ensure_index(OUT / "index")
        shutil.copytree(OUT / "index", index, dirs_exist_ok=True)
    t = time.time()
    for f, stype in extended_corpus(OUT / "extended-corpus", ROOT / "bench" / "out" / "default" / "corpus"):
        subprocess.check_call(medr2("ingest", str(f), "--index", str(index), "--source-type", stype, "--progress"))
    (index / "extended-built").write_text(f"built in {time.time() - t:.0f} s\n")
    return index


def run_pair(method: str, dataset: str, args) -> int:
    spec = f"{DATASETS[dataset]}:{args.n}"
    index = zh_index() if dataset == "mcmle" and method not in ("direct", "direct_cot") else args.index
    cmd = medr2("eval", "run", "--dataset", spec, "--method", method, "--index", str(index),
                "--config", str(args.config), "--answer-mode", args.answer_mode, "--seed", str(args.seed),
                "--out", str(args.runs), "--progress")  # a bar with ETA in the log, too
    if dataset in ("mmlu", "medqa", "medmcqa", "pubmedqa", "bioasq"):
        cmd += ["--benchmark", str(MIRAGE)]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    t = time.time()
    print(f"== {method} on {spec} ({args.answer_mode})", flush=True)
    rc = subprocess.call(cmd)
    print(f"== {method} on {dataset}: exit {rc}, {time.time() - t:.0f} s", flush=True)
    return rc


def trust_index() -> Path:
    """An index of the guidelines the trust questions come from (every passage embedded), with
    its knowledge graph: built once."""
    index = OUT / "trust-index"
    if (index / "kg-built").exists():
        return index
    ids = {json.loads(x)["ngc_id"] for x in TRUST_QUESTIONS.read_text(encoding="utf-8").splitlines() if x.strip()}
    sub = OUT / "trust-corpus" / "ngc_trust.jsonl"
    sub.parent.mkdir(parents=True, exist_ok=True)
    with open(NGC, encoding="utf-8") as f:
        sub.write_text("".join(line for line in f if json.loads(line)["ngc_id"] in ids), encoding="utf-8")
    t = time.time()
    subprocess.check_call(medr2("ingest", str(sub), "--index", str(index)))
    subprocess.check_call(medr2("kg", "build", "--index", str(index)))
    (index / "kg-built").write_text(f"{len(ids)} guidelines, built in {time.time() - t:.0f} s\n")
    return index


def trust(args) -> None:
    index = trust_index()
    llm = args.llm or "none"
    modes = ["passage", "full", "oracle_kg"] + (["no_rag"] if llm != "none" else [])
    cmd = medr2("eval", "trust", "--questions", str(TRUST_QUESTIONS), "--index", str(index), "--llm", llm,
                "--config", str(args.config), "--out", str(RESULTS / "trust" / ("extractive" if llm == "none" else llm)),
                "--ragas")
    for m in modes:
        cmd += ["--mode", m]
    if args.limit:
        cmd += ["--limit", str(args.limit)]
    subprocess.check_call(cmd)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--phase", required=True, choices=[*PHASES, "trust", "report", "mirage"])
    ap.add_argument("--llm", help="trust phase: generator (default none: the extractive path; e.g. local)")
    ap.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated: " + ", ".join(DATASETS))
    ap.add_argument("--methods", help="comma-separated: only these of the phase's methods "
                    "(e.g. --phase ablations --methods +reformulator)")
    ap.add_argument("--n", type=int, default=100, help="questions per dataset (fixed seeded subset)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, help="answer the first N questions of each pair's subset (its file "
                    "order; answered ones are skipped, so a rerun with a larger N continues)")
    ap.add_argument("--answer-mode", default="loglik", choices=["loglik", "loglik-cal", "generate"])
    ap.add_argument("--index", type=Path, default=OUT / "index")
    ap.add_argument("--extended-index", action="store_true",
                    help=f"retrieve from the second index ({OUT / 'index-extended'}: the default one plus the "
                         "other corpora of ../shared/data, built on first use); overrides --index")
    ap.add_argument("--config", type=Path, default=ROOT / "bench" / "eval.toml")
    ap.add_argument("--runs", type=Path, help=f"run records (default {RESULTS / 'runs'}; with --order paper "
                    f"{ORDER_RUNS})")
    ap.add_argument("--order", default="relevance", choices=["relevance", "paper"],
                    help="appraise.order of the fine-rerank methods (+reranker, +reformulator+reranker, medr2): "
                         "paper = Med-R2's F alone, run into its own run directory and reported apart")
    args = ap.parse_args()
    # the second index's runs never share a directory with the default index's (their corpus differs)
    args.runs = args.runs or (ORDER_RUNS if args.order == "paper" else
                              RESULTS / "runs-gated-ext" if args.extended_index else RESULTS / "runs")
    if args.phase == "mirage":
        pred = SHARED / "benchmarks" / "mirage" / "prediction_sample"
        subprocess.check_call(medr2("eval", "score", "--mirage", str(pred), "--benchmark", str(MIRAGE)))
        return
    if args.phase == "trust":
        trust(args)
        return
    if args.phase == "report":
        if args.order == "paper":  # only the paper-order runs' report, never over the main one
            subprocess.check_call(medr2("eval", "report", str(args.runs), "--out", str(ORDER_REPORT)))
            return
        trust_dirs = sorted(d for d in (RESULTS / "trust").glob("*") if (d / "summary.json").exists())
        cmd = medr2("eval", "report", str(args.runs), "--out", str(RESULTS))
        for d in trust_dirs:
            cmd += ["--trust", str(d)]
        subprocess.check_call(cmd)
        subprocess.check_call(medr2("eval", "score", "--run", str(args.runs)))
        if ORDER_RUNS.exists() and args.runs != ORDER_RUNS:  # the paper-order ablation runs, reported apart
            subprocess.check_call(medr2("eval", "report", str(ORDER_RUNS), "--out", str(ORDER_REPORT)))
        return
    unknown = [d for d in args.datasets.split(",") if d not in DATASETS]
    if unknown:
        sys.exit(f"unknown dataset(s) {unknown}; choose from {', '.join(DATASETS)}")
    methods = PHASES[args.phase]
    if args.methods:
        methods = args.methods.split(",")
        stray = [m for m in methods if m not in PHASES[args.phase]]
        if stray:
            sys.exit(f"method(s) {stray} are not in phase {args.phase}; choose from {', '.join(PHASES[args.phase])}")
    if args.order != "relevance":
        if [m for m in methods if m not in FINE_RERANK] and args.methods:
            sys.exit(f"--order {args.order} applies to {', '.join(FINE_RERANK)} only")
        methods = [m for m in methods if m in FINE_RERANK]
        if not methods:
            sys.exit(f"--order {args.order}: phase {args.phase} has no fine-rerank method ({', '.join(FINE_RERANK)})")
        args.config = order_config(args.config, args.order)
    if args.answer_mode.startswith("loglik") and "+reformulator+reranker" in methods:
        # A scored letter has no rationale to widen a second round's query, so medr2 in loglik mode runs
        # one round of reformulation and fine rerank: this ablation would repeat medr2's run question
        # for question (tests/pipelines/test_ask.py checks it), so medr2's records stand for it.
        print("+reformulator+reranker skipped: in loglik mode it is medr2's run (one round of both modules)")
        methods = [m for m in methods if m != "+reformulator+reranker"]
    if args.extended_index:
        args.index = extended_index()
    ensure_index(args.index)
    failed = []
    for method in methods:
        for d in args.datasets.split(","):
            if run_pair(method, d, args) != 0:
                failed.append(f"{method}/{d}")
    print(json.dumps({"failed": failed}))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
