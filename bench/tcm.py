"""TCM-DiffRAG on TCMBench's development split (issue 37): direct answering, vanilla RAG and the
``tcm_diffrag`` pipeline, loglik answers, on a seeded 30% evaluation fold; the solved cases come
from the other 70%.

    python bench/tcm.py split        # bench/out/tcm/{train,eval}/{CVR,FKU,KHC}.json (groups kept whole)
    python bench/tcm.py index        # GB/T 16751 + the train fold's solved items, and the case graph
    python bench/tcm.py retrieval    # BM25 with and without the TCM term lists; encoder speed
    python bench/tcm.py match        # how often the matched cases' paths hold the gold syndrome (no LLM)
    python bench/tcm.py options      # option-conditioned retrieval: does it favour the gold option? (no LLM)
    python bench/tcm.py dev          # settings chosen on the train fold (own item excluded)
    python bench/tcm.py tune         # kg.cases.path_weight by replaying the dev records
    python bench/tcm.py run --kinds CVR --methods direct,vanilla_rag,tcm_diffrag
    python bench/tcm.py run --methods vanilla_rag,tcm_diffrag --limit 0   # the whole evaluation fold
    python bench/tcm.py run --kinds CVR --methods tcm_diffrag,direct,direct_cot,+cot --answer-mode generate
    python bench/tcm.py report       # accuracy by item kind, paired McNemar

The fold of a group (a case vignette with its sub-questions, or one question) is decided by the
SHA-1 of ``tcm-fold:<group>``: the same on every machine. Runs go to
``bench/results/eval/runs/tcmbench-*`` (committed, resumable); the index stays in ``bench/out/tcm``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MEDR2_SHARED_DATA") or ROOT.parent / "shared" / "data")
DEV = SHARED / "benchmarks" / "tcmbench_dev"
GBT = SHARED / "corpora" / "chinese" / "tcm_terminology_gbt16751" / "GBT16751-2021_TCM_clinical_terms_parts1-3.txt"
OUT = ROOT / "bench" / "out" / "tcm"
RUNS = ROOT / "bench" / "results" / "eval" / "runs"
CONFIG = ROOT / "bench" / "tcm.toml"
KINDS = ("CVR", "FKU", "KHC")
TRAIN_SHARE = 0.7
# questions answered per kind (seeded subsets of the evaluation fold; CVR: all of it)
DEFAULT_N = {"CVR": 0, "FKU": 100, "KHC": 100}
LLM_N = {"CVR": 50, "FKU": 30, "KHC": 30}  # retrieval methods: the first N of the seeded answer order (time)

sys.path.insert(0, str(ROOT / "src"))


def medr2(*args: str) -> list[str]:
    return [str(ROOT / ".venv" / "bin" / "medr2"), *args]


def fold(group: str) -> str:
    h = int(hashlib.sha1(f"tcm-fold:{group}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "train" if h < TRAIN_SHARE else "eval"


def split() -> None:
    for kind in KINDS:
        data = json.loads((DEV / f"{kind}.json").read_text(encoding="utf-8"))
        parts = {"train": [], "eval": []}
        for n, rec in enumerate(data["example"], 1):
            parts[fold(f"{kind}-{rec.get('index', n)}")].append(rec)
        for name, recs in parts.items():
            out = OUT / name / f"{kind}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps({**data, "example": recs}, ensure_ascii=False), encoding="utf-8")
            print(f"{name}/{kind}.json: {len(recs)} groups")


def term_list() -> Path:
    """The standard's terms and the Chinese disease, symptom and drug lists, one a line (a jieba
    user dictionary)."""
    from medr2.terminology.sources import gbt16751_records

    words = {w for t in gbt16751_records(str(GBT)) for w in [t.zh, *t.alternatives]}
    for name in ("symptom", "disease", "drug"):
        words |= {x.strip() for x in (SHARED / "corpora" / "chinese" / "medical_kg_dicts" / f"{name}.txt").read_text(
            encoding="utf-8").splitlines() if len(x.strip()) >= 2}
    out = OUT / "terms.txt"
    out.write_text("".join(f"{w}\n" for w in sorted(words) if " " not in w), encoding="utf-8")
    return out


def index() -> None:
    idx = OUT / "index"
    if (idx / "tcm-built").exists():
        return
    t = time.time()
    subprocess.check_call(medr2("ingest", str(GBT), "--index", str(idx), "--config", str(CONFIG)))
    for kind in KINDS:
        subprocess.check_call(medr2("ingest", str(OUT / "train" / f"{kind}.json"), "--index", str(idx)))
    for kind in KINDS:
        subprocess.check_call(medr2("kg", "cases", str(OUT / "train" / f"{kind}.json"), "--index", str(idx)))
    (idx / "tcm-built").write_text(f"built in {time.time() - t:.0f} s\n")


def match() -> list[str]:
    """How often the matched solved cases hold the gold answer: the gold syndrome in a matched
    path (syndrome questions), and the gold option named by a matched path or answer (every
    question); exact duplicates of evaluation questions in the training fold counted."""
    from medr2.config import Config
    from medr2.ingest.loaders.tcmbench import read_tcmbench
    from medr2.kg.build import open_kg
    from medr2.kg.tcm import CaseMatcher, aspect, cases_from_kg, similarity, strip_suffix

    c = Config.load(CONFIG).kg.cases
    kg = open_kg(OUT / "index")
    cases = cases_from_kg(kg)
    matcher = CaseMatcher(cases, c.finding_weight, c.min_similarity)
    kg.close()
    # the ceiling of matching: the syndromes any solved case of the training fold names
    known = [s for s in (strip_suffix(x.nodes().get("syndrome", "")) for x in cases) if s]
    lines = ["| items | questions | syndrome questions | gold syndrome in a matched path | gold syndrome in any "
             "training case | gold option named by a matched case | exact duplicate in the training fold |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    for kind in KINDS:
        seen = {(it.text.replace(" ", ""), tuple(sorted(it.options.values())))
                for it in read_tcmbench(OUT / "train" / f"{kind}.json")}
        n = syn = syn_hit = syn_any = named = dup = 0
        for it in read_tcmbench(OUT / "eval" / f"{kind}.json"):
            got = matcher.match(it.text, c.k)
            gold = strip_suffix(it.answer_text)
            n += 1
            dup += (it.text.replace(" ", ""), tuple(sorted(it.options.values()))) in seen
            names = [x for m in got for x in list(m["nodes"].values()) + m["answer"].split("；") if x]
            named += any(similarity(gold, strip_suffix(x)) >= 0.8 for x in names)
            if aspect(it.stem, it.answer_text) == "syndrome":
                syn += 1
                syn_any += any(similarity(gold, x) >= 0.8 for x in known)
                syn_hit += any(similarity(gold, strip_suffix(m["nodes"].get("syndrome", ""))) >= 0.8
                               for m in got if m["nodes"].get("syndrome"))
        lines.append(f"| {kind} | {n} | {syn} | {syn_hit} | {syn_any} | {named} ({named / max(n, 1):.1%}) | {dup} |")
    print("\n".join(lines))
    return lines


def options_probe() -> None:
    """Option-conditioned retrieval, probed without a model on the training fold's case vignettes:
    for each option, the top BM25 passage of "stem + option" (or "case + stem + option"), the
    question's own solved item excluded; how often that passage names the option, for the gold
    option and for the distractors. A retrieval that favours the gold option would give the model
    evidence per option; one that names every option alike gives it nothing to choose by."""
    from medr2.config import Config
    from medr2.index.index import Index
    from medr2.ingest.loaders.tcmbench import read_tcmbench
    from medr2.pipelines.engine import Engine

    cfg = Config.load(CONFIG)
    idx = Index.open(OUT / "index", cfg)
    try:
        e = Engine(idx, cfg, None, None)
        items = list(read_tcmbench(OUT / "train" / "CVR.json"))
        lines = [f"{len(items)} training-fold case-vignette questions; per option, the top passage of BM25 "
                 "(own solved item excluded) names the option:", "",
                 "| query | gold option named | a distractor named | only the gold option named |",
                 "|---|---:|---:|---:|"]
        for label, with_case in (("stem + option", False), ("case + stem + option", True)):
            gold = gold_n = other = other_n = only = 0
            for it in items:
                ex = frozenset({f"tcmbench:{it.group}"})
                named = {}
                for letter, o in it.options.items():
                    top = e.retrieve(f"{it.text if with_case else it.stem} {o}", 5, ex)[:1]
                    named[letter] = any(o in h.text for h in top)
                for letter, v in named.items():
                    if letter in it.answer:
                        gold, gold_n = gold + v, gold_n + 1
                    else:
                        other, other_n = other + v, other_n + 1
                only += sum(named.values()) == 1 and any(named[x] for x in it.answer)
            lines.append(f"| {label} | {gold / gold_n:.1%} | {other / other_n:.1%} | {only} of {len(items)} |")
    finally:
        idx.close()
    (ROOT / "bench" / "results" / "tcm-options.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    print("\n".join(lines))


def retrieval() -> None:
    """Chinese retrieval on the training fold: for each syndrome / disease / therapy question whose
    answer is a GB/T 16751 entry, the rank of that entry's definition among the standard's entries
    by BM25 (jieba, with and without the TCM term lists loaded as words); and the bundled
    encoders' speed on the standard's passages."""
    import numpy as np

    from medr2.config import Config
    from medr2.index.index import Index
    from medr2.index.sparse import Tokenizer
    from medr2.kg.tcm import TermIndex, aspect
    from medr2.ingest.loaders.tcmbench import read_tcmbench
    import bm25s

    cfg = Config.load(CONFIG)
    idx = Index.open(OUT / "index", cfg)
    try:
        terms = TermIndex.of_store(idx.store)
    finally:
        idx.close()
    entries = sorted({e.passage_id: e for e in terms.by_key.values()}.values(), key=lambda e: e.passage_id)
    pos = {e.passage_id: i for i, e in enumerate(entries)}
    qs = []
    for kind in ("CVR", "FKU"):
        for it in read_tcmbench(OUT / "train" / f"{kind}.json"):
            if aspect(it.stem, it.answer_text) in ("syndrome", "disease", "therapy"):
                hit = terms.lookup(it.answer_text)
                if hit is not None:
                    qs.append((it.text, pos[hit.passage_id]))
    lines = [f"{len(qs)} training-fold questions whose answer is a GB/T 16751 entry; {len(entries)} entries", "",
             "| retriever | recall@1 | recall@5 | recall@20 |", "|---|---:|---:|---:|"]
    for name, dicts in (("BM25, jieba", []), ("BM25, jieba + TCM and medical term lists", [str(term_list())])):
        c = cfg.model_copy(deep=True)
        c.sparse.jieba_user_dicts = list(dicts)
        tok = Tokenizer(c.sparse)
        model = bm25s.BM25(k1=c.sparse.k1, b=c.sparse.b)
        model.index([tok.tokens(e.text, "zh") for e in entries], show_progress=False)
        ranks = []
        for text, gold in qs:
            docs, _ = model.retrieve([tok.tokens(text, "zh")], k=20, show_progress=False)
            row = list(docs[0])
            ranks.append(row.index(gold) + 1 if gold in row else 99)
        r = np.array(ranks)
        lines.append(f"| {name} | {np.mean(r <= 1):.3f} | {np.mean(r <= 5):.3f} | {np.mean(r <= 20):.3f} |")
    # dense encoders on a pool small enough to encode with e5: the gold entries and 500 others
    import random

    from medr2.index.dense import load_encoder

    gold = sorted({g for _, g in qs})
    rest = [i for i in range(len(entries)) if i not in set(gold)]
    pool = gold + sorted(random.Random(0).sample(rest, 500))
    where = {p: i for i, p in enumerate(pool)}
    texts = [entries[i].text for i in pool]
    lines += ["", f"On a pool of {len(pool)} entries (the {len(gold)} gold ones and 500 seeded others):", "",
              "| retriever | recall@1 | recall@5 | recall@20 | passages/s encoded (2 cores) |", "|---|---:|---:|---:|---:|"]
    from medr2.search.fusion import fuse, union_candidates

    def row_of(name: str, ranks: list[int], rate: str) -> str:
        r = np.array(ranks)
        return f"| {name} | {np.mean(r <= 1):.3f} | {np.mean(r <= 5):.3f} | {np.mean(r <= 20):.3f} | {rate} |"

    def rank_of(order: list[int], g: int) -> int:
        return order.index(g) + 1 if g in order[:20] else 99

    k = cfg.fusion.sparse_k  # each retriever's list, as the index fuses them (50 and 50 by default)
    tok = Tokenizer(cfg.sparse)
    model = bm25s.BM25(k1=cfg.sparse.k1, b=cfg.sparse.b)
    model.index([tok.tokens(t, "zh") for t in texts], show_progress=False)
    sparse = []
    for text, _ in qs:
        docs, scores = model.retrieve([tok.tokens(text, "zh")], k=k, show_progress=False)
        # the index keeps only hits that share a term with the query (score > 0): so does this list
        sparse.append([(int(i), float(s)) for i, s in zip(docs[0], scores[0]) if s > 0])
    lines.append(row_of("BM25, jieba", [rank_of([i for i, _ in sp], where[g]) for sp, (_, g) in zip(sparse, qs)], "-"))
    for spec in ("bundled:all-MiniLM-L6-v2", "bundled:multilingual-e5-small"):
        c = Config()
        c.dense.model = spec
        enc = load_encoder(c.dense)
        t = time.time()
        vecs = enc.encode_passages(texts)
        rate = f"{len(texts) / (time.time() - t):.1f}"
        dense = []
        for text, _ in qs:
            sims = vecs @ enc.encode_query(text)
            dense.append([(int(i), float(sims[i])) for i in np.argsort(-sims)[:k]])
        golds = [where[g] for _, g in qs]
        lines.append(row_of(f"dense {spec}", [rank_of([i for i, _ in d], g) for d, g in zip(dense, golds)], rate))
        # the hybrid the index would run with this encoder (fusion.dense_k > 0): both fusions of medr2
        for method in ("union", "rrf"):
            ranks = [rank_of([i for i, _ in fuse(union_candidates(d, sp), method, cfg.fusion.rrf_k,
                                                     cfg.fusion.dense_weight)], g)
                     for d, sp, g in zip(dense, sparse, golds)]
            lines.append(row_of(f"BM25 + dense {spec.split(':')[-1]}, fusion {method}", ranks, "-"))
    out = "\n".join(lines)
    (ROOT / "bench" / "results" / "tcm-retrieval.md").write_text("# Chinese retrieval for TCM (bench/tcm.py retrieval)\n\n"
                                                               + out + "\n", encoding="utf-8")
    print(out)


def run(args) -> None:
    for kind in args.kinds.split(","):
        n = args.n if args.n is not None else DEFAULT_N[kind]
        spec = str(OUT / "eval" / f"{kind}.json") + (f":{n}" if n else "")
        for method in args.methods.split(","):
            cmd = medr2("eval", "run", "--dataset", spec, "--method", method, "--index", str(OUT / "index"),
                        "--config", str(CONFIG), "--answer-mode", args.answer_mode, "--seed", "0",
                        "--out", str(RUNS), "--progress")
            # generated answers (a chain of thought, ~40 s each) take the first LLM_N for every method;
            # --limit N takes the first N instead (0: the whole subset)
            limit = LLM_N[kind] if args.limit is None else args.limit
            if (method != "direct" or args.answer_mode == "generate") and limit and (args.n is None or args.limit):
                cmd += ["--limit", str(limit)]
            t = time.time()
            print(f"== {method} on {kind} ({spec})", flush=True)
            rc = subprocess.call(cmd)
            print(f"== {method} on {kind}: exit {rc}, {time.time() - t:.0f} s", flush=True)


DEV_N = {"CVR": 60, "FKU": 60, "KHC": 30}
DEV_OUT = ROOT / "bench" / "results" / "eval" / "tcm-dev"


def dev(args) -> None:
    """Choices made on the training fold (each question's own solved item excluded from retrieval
    and matching): direct once, then tcm_diffrag under each bench/tcm-dev/*.toml variant."""
    variants = args.variants.split(",") if args.variants else sorted(p.stem for p in (ROOT / "bench" / "tcm-dev").glob("*.toml"))
    jobs = [("direct", CONFIG, DEV_OUT / "direct")] + [
        ("tcm_diffrag", ROOT / "bench" / "tcm-dev" / f"{v}.toml", DEV_OUT / v) for v in variants]
    for kind in args.kinds.split(","):
        spec = str(OUT / "train" / f"{kind}.json") + f":{DEV_N[kind]}"
        for method, cfg, out in jobs:
            cmd = medr2("eval", "run", "--dataset", spec, "--method", method, "--index", str(OUT / "index"),
                        "--config", str(cfg), "--answer-mode", "loglik", "--seed", "0", "--out", str(out), "--progress")
            t = time.time()
            print(f"== dev {method} {out.name} on {kind}", flush=True)
            rc = subprocess.call(cmd)
            print(f"== dev {method} {out.name} on {kind}: exit {rc}, {time.time() - t:.0f} s", flush=True)


WEIGHTS = (0.0, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0)


def letter_scores(rationale: str) -> dict[str, float]:
    """The option letters' log-probabilities a loglik record's rationale shows."""
    import re

    head = rationale.split(";")[0]
    return {k: float(v) for k, v in re.findall(r"\b([A-J]) (-?\d+\.\d+|-inf)", head)}


def tune(args) -> None:
    """kg.cases.path_weight by replay on the training fold: the recorded letter scores of each
    variant's tcm_diffrag run plus w x the options' graph support (recomputed without a model)."""
    from medr2.config import Config
    from medr2.eval.runner import load_questions, own_sources
    from medr2.pipelines import Engine, Pipeline

    variants = args.variants.split(",") if args.variants else sorted(p.stem for p in (ROOT / "bench" / "tcm-dev").glob("*.toml"))
    lines = ["| variant | n | " + " | ".join(f"w={w}" for w in WEIGHTS) + " |", "|---|---:|" + "---:|" * len(WEIGHTS)]
    for v in variants:
        cfg = Config.load(ROOT / "bench" / "tcm-dev" / f"{v}.toml")
        e = Engine.open(OUT / "index", cfg, generator="none", scorer="none")
        right = {w: 0 for w in WEIGHTS}
        n = 0
        try:
            for kind in KINDS:
                recs = {}
                for d in (DEV_OUT / v / f"tcmbench-{kind}").glob("tcm_diffrag+loglik/*"):
                    for f in d.glob(f"{kind}-*.json"):
                        recs[f.stem] = json.loads(f.read_text(encoding="utf-8"))
                for q in load_questions(str(OUT / "train" / f"{kind}.json"), None):
                    if q.id not in recs:
                        continue
                    scores = letter_scores(json.loads(recs[q.id][0])["step_by_step_thinking"])
                    res = Pipeline(e, "tcm_diffrag").run(q.question, q.options, own_sources(q))
                    support = res.subgraph["option_support"]
                    n += 1
                    for w in WEIGHTS:
                        fused = {k: scores[k] + w * support[k]["score"] for k in scores}
                        right[w] += max(fused, key=lambda k: (fused[k], -ord(k))) == q.answer
        finally:
            e.close()
        lines.append(f"| {v} | {n} | " + " | ".join(f"{100 * right[w] / max(n, 1):.1f}" for w in WEIGHTS) + " |")
    text = "\n".join(lines)
    (ROOT / "bench" / "results" / "tcm-dev-path-weight.md").write_text(
        "# kg.cases.path_weight on the training fold (bench/tcm.py tune)\n\nAccuracy (%) of the recorded "
        "tcm_diffrag letter scores + w x graph support, replayed.\n\n" + text + "\n", encoding="utf-8")
    print(text)


def records(root: Path, kind: str, method: str, mode: str = "+loglik", model: str = "*") -> dict[str, dict]:
    """The records of one run by question id; ``mode`` "" is generated answers, whose run
    directory also holds the ``--llm none`` run (``model`` "none" picks it, "llama*" the model's)."""
    out = {}
    for d in (root / f"tcmbench-{kind}").glob(f"{method}{mode}/{model}"):
        for f in d.glob(f"{kind}-*.json"):
            out[f.stem] = json.loads(f.read_text(encoding="utf-8"))[1]
    return out


def table(root: Path, kinds: list[str], methods: list[str], base: list[str], target: str, mode: str = "+loglik",
          model: str = "*") -> list[str]:
    """Accuracy per kind and method on the questions every method answered, and paired McNemar
    of ``target`` against each of ``base`` (``mode``, ``model``: :func:`records`)."""
    from medr2.eval.scoring import mcnemar_p

    lines = ["| items | n | " + " | ".join(methods) + " | " + " | ".join(f"{target} vs {b}: +/- (p)" for b in base)
             + " | s/question (" + ", ".join(methods) + ") |",
             "|---|---:|" + "---:|" * (len(methods) + len(base) + 1)]
    pooled: dict[str, dict[str, bool]] = {m: {} for m in methods}
    secs: dict[str, list[float]] = {m: [] for m in methods}
    for kind in kinds + ["all"]:
        if kind == "all":
            recs = {m: pooled[m] for m in methods}
        else:
            got = {m: records(root, kind, m, mode, model) for m in methods}
            common = set.intersection(*(set(r) for r in got.values())) if got else set()
            recs = {m: {q: bool(got[m][q]["correct"]) for q in common} for m in methods}
            for m in methods:
                pooled[m].update({f"{kind}/{q}": v for q, v in recs[m].items()})
                secs[m] += [got[m][q]["seconds"] for q in common]
        n = len(next(iter(recs.values())))
        if not n:
            continue
        accs = [f"{100 * sum(recs[m].values()) / n:.1f}" for m in methods]
        pairs = []
        for b in base:
            plus = sum(recs[target][q] and not recs[b][q] for q in recs[target])
            minus = sum(recs[b][q] and not recs[target][q] for q in recs[target])
            pairs.append(f"+{plus}/-{minus} ({mcnemar_p(plus, minus):.3f})")
        cost = ", ".join(f"{sum(secs[m]) / max(len(secs[m]), 1):.1f}" for m in methods) if kind == "all" else ""
        lines.append(f"| {kind} | {n} | " + " | ".join(accs) + " | " + " | ".join(pairs) + f" | {cost} |")
    return lines


def report() -> None:
    out = ["# TCM-DiffRAG on TCMBench (bench/tcm.py)", "",
           "Generated by `python bench/tcm.py report`; bundled Qwen2.5-Coder-1.5B, loglik answers, bench/tcm.toml.", "",
           "## Evaluation fold (30% of the dev split's groups: CVR all 83, FKU and KHC a seeded 100; the questions every "
           "method answered, n per row)", ""]
    out += table(RUNS, list(KINDS), ["direct", "vanilla_rag", "tcm_diffrag"], ["direct", "vanilla_rag"], "tcm_diffrag")
    routed = RUNS.parent / "runs-tcm-before-routing"
    if routed.exists():
        out += ["", "## tcm_diffrag with knowledge items answered from retrieval (kg.cases.min_findings) against "
                "the union for every question (runs-tcm-before-routing), evaluation fold", ""]
        got = {"direct": {k: records(routed, k, "tcm_diffrag") for k in KINDS},
               "tcm_diffrag": {k: records(RUNS, k, "tcm_diffrag") for k in KINDS}}
        out += _pair_lines(got, ("union, every question", "routed"))
    before = RUNS.parent / "runs-tcm-before-union"
    if before.exists():
        out += ["", "## tcm_diffrag with the retrieval union (kg.cases.passages_k = 3) against the two graphs alone "
                "(runs-tcm-before-union), evaluation fold", ""]
        union = routed if routed.exists() else RUNS
        got = {"direct": {k: records(before, k, "tcm_diffrag") for k in KINDS},
               "tcm_diffrag": {k: records(union, k, "tcm_diffrag") for k in KINDS}}
        out += _pair_lines(got, ("graphs alone", "union"))
    # generated answers: the chain-of-thought baselines are direct_cot (MIRAGE's CoT) and +cot
    # (vanilla RAG with a chain of thought); direct answers without one
    gen = [m for m in ("direct", "direct_cot", "+cot", "tcm_diffrag") if records(RUNS, "CVR", m, "", "llama*")]
    if "tcm_diffrag" in gen and len(gen) > 1:
        out += ["", "## Generated answers, case vignettes (the first 50 of the evaluation fold; `python bench/tcm.py "
                "run --kinds CVR --methods tcm_diffrag,direct,direct_cot,+cot --answer-mode generate`): "
                "tcm_diffrag, direct_cot and +cot write a chain of thought, direct does not", ""]
        out += table(RUNS, ["CVR"], gen, [m for m in gen if m != "tcm_diffrag"], "tcm_diffrag", "", "llama*")
    out += ["", "## Matched solved cases (k = 3) on the evaluation fold", ""] + match()
    out += ["", "## Without a model (`--llm none`: the option the two graphs support most, else abstain; whole fold)", "",
            "| items | n | answered | right (of all) | precision (of answered) |", "|---|---:|---:|---:|---:|"]
    for kind in KINDS:
        r = records(RUNS, kind, "tcm_diffrag", "", "none")
        n, ans = len(r), [x for x in r.values() if not x["insufficient"]]
        right = sum(x["correct"] for x in r.values())
        if n:
            out.append(f"| {kind} | {n} | {len(ans) / n:.1%} | {right / n:.1%} | {right / max(len(ans), 1):.1%} |")
    out += ["", "## Choices on the training fold (each question's own item excluded)", ""]
    variants = sorted(p.name for p in DEV_OUT.iterdir() if (ROOT / "bench" / "tcm-dev" / f"{p.name}.toml").exists()) \
        if DEV_OUT.exists() else []
    for v in variants:
        out += [f"### tcm_diffrag with bench/tcm-dev/{v}.toml", ""]
        got = {m: {k: records(DEV_OUT / ("direct" if m == "direct" else v), k, m) for k in KINDS}
               for m in ("direct", "tcm_diffrag")}
        out += _pair_lines(got) + [""]
    (ROOT / "bench" / "results" / "tcm.md").write_text("\n".join(out) + "\n", encoding="utf-8")
    print("\n".join(out))


def _pair_lines(got: dict[str, dict[str, dict[str, dict]]], labels: tuple[str, str] = ("direct", "tcm_diffrag")) -> list[str]:
    """``got["direct"]`` is the baseline, ``got["tcm_diffrag"]`` the method (``labels`` name them)."""
    from medr2.eval.scoring import mcnemar_p

    lines = [f"| items | n | {labels[0]} | {labels[1]} | +/- (p) |", "|---|---:|---:|---:|---:|"]
    allp: list[tuple[bool, bool]] = []
    for kind in list(KINDS) + ["all"]:
        if kind == "all":
            pairs = allp
        else:
            common = set(got["direct"][kind]) & set(got["tcm_diffrag"][kind])
            pairs = [(bool(got["direct"][kind][q]["correct"]), bool(got["tcm_diffrag"][kind][q]["correct"]))
                     for q in sorted(common)]
            allp = allp + pairs
        if not pairs:
            continue
        n = len(pairs)
        plus = sum(t and not d for d, t in pairs)
        minus = sum(d and not t for d, t in pairs)
        lines.append(f"| {kind} | {n} | {100 * sum(d for d, _ in pairs) / n:.1f} | {100 * sum(t for _, t in pairs) / n:.1f} "
                     f"| +{plus}/-{minus} ({mcnemar_p(plus, minus):.3f}) |")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("phase", choices=["split", "index", "match", "retrieval", "run", "dev", "tune", "report", "options"])
    ap.add_argument("--variants", default="")
    ap.add_argument("--kinds", default="CVR,FKU,KHC")
    ap.add_argument("--methods", default="direct,vanilla_rag,tcm_diffrag")
    ap.add_argument("--n", type=int)
    ap.add_argument("--limit", type=int, help="run: the first N questions of each kind's subset for the retrieval "
                    "methods (default CVR 50, FKU 30, KHC 30; 0 = all of it)")
    ap.add_argument("--answer-mode", default="loglik", choices=["loglik", "generate"],
                    help="run: loglik option scores, or generated answers with a chain of thought")
    args = ap.parse_args()
    {"split": lambda: split(), "index": lambda: index(), "match": lambda: match(), "retrieval": lambda: retrieval(), "run": lambda: run(args),
     "dev": lambda: dev(args), "tune": lambda: tune(args), "report": lambda: report(),
     "options": lambda: options_probe()}[
        args.phase]()


if __name__ == "__main__":
    main()
