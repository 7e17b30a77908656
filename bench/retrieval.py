"""Retrieval benchmark on ../shared/data; prints markdown tables.

Tasks
-----
* PubMedQA: each of the 1,000 expert-labelled questions; gold = its own abstract's CONTEXTS
  passages. Questions paraphrase titles, so the corpus mixes in distractors (MedQuAD answers,
  NGC guideline passages, OpenStax modules, MedlinePlus topics).
* MedQuAD: answered questions whose answer is in the corpus; gold = the passages of that
  answer. The benchmark ingests MedQuAD answers titled by their focus only (the question is
  not in the passage), otherwise retrieval would be trivial.

Retrievers: BM25, dense, union (Med-R2 order), RRF, and SPLADE when ``--splade`` is given.

Cost: passages/s ingested with embedding and without (the encoder swapped for a zero-vector
stand-in, measured in the same run), the raw encoder's passages/s on the same texts, query
latency p50/p95 on the full corpus, index size on disk and in memory.

Usage::

    python bench/retrieval.py                # default corpus (~15k passages, ~20 minutes on 2 cores)
    python bench/retrieval.py --scale small --splade bundled:splade-tiny   # with learned sparse
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import shutil
import sys
import time
from datetime import date
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from medr2.config import Config  # noqa: E402
from medr2.util.retrieval_metrics import mean, mrr, ndcg_at_k, percentile, recall_at_k  # noqa: E402
from medr2.index.index import Index  # noqa: E402
from medr2.ingest.pipeline import ingest  # noqa: E402
from medr2.search.fusion import fuse  # noqa: E402
from medr2.search.hybrid import HybridSearcher  # noqa: E402
from medr2.search.rerank import FusedOrder  # noqa: E402
from medr2.formulate.train import split_of  # noqa: E402
from medr2.search.rerank_data import MEDQUAD_HELD_OUT  # noqa: E402

DATA = Path(os.environ.get("MEDR2_SHARED_DATA", ROOT.parent / "shared" / "data"))
OUT = ROOT / "bench" / "out"

SCALES = {  # distractor counts
    "small": {"pubmedqa": 300, "medquad": 600, "ngc": 8, "openstax": 20, "medlineplus": 200, "queries": 150},
    "default": {"pubmedqa": 1000, "medquad": 2500, "ngc": 30, "openstax": 60, "medlineplus": 1017, "queries": 400},
}


def build_corpus(scale: dict, folder: Path) -> dict:
    """Write the benchmark corpus files; return gold data."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = random.Random(13)
    pq = json.loads((DATA / "benchmarks/pubmedqa/ori_pqal.json").read_text())
    pmids = list(pq)[: scale["pubmedqa"]]
    (folder / "pubmedqa.json").write_text(json.dumps({p: pq[p] for p in pmids}))
    medquad = []
    with (DATA / "corpora/medquad/medquad.jsonl").open() as fh:
        for line in fh:
            r = json.loads(line)
            if r.get("answer", "").strip():
                medquad.append(r)
    rng.shuffle(medquad)
    medquad = medquad[: scale["medquad"]]
    with (folder / "medquad_answers.jsonl").open("w") as fh:
        for r in medquad:
            fh.write(json.dumps({"id": r["qid"], "title": r["focus"], "text": r["answer"], "source_type": "entry"}) + "\n")
    with (DATA / "corpora/guidelines/ngc_summaries.jsonl").open() as src, (folder / "ngc.jsonl").open("w") as dst:
        for i, line in enumerate(src):
            if i >= scale["ngc"]:
                break
            dst.write(line)
    with (DATA / "corpora/textbooks/microbiology.jsonl").open() as src, (folder / "openstax.jsonl").open("w") as dst:
        for i, line in enumerate(src):
            if i >= scale["openstax"]:
                break
            dst.write(line)
    with (DATA / "corpora/encyclopedia/medline_health_topics_en.csv").open() as src, \
            (folder / "medlineplus.csv").open("w") as dst:
        for i, line in enumerate(src):
            if i > scale["medlineplus"]:
                break
            dst.write(line)
    # Queries come only from what medr2's reranker never trains on: PubMedQA's 500 test questions
    # (MIRAGE's PubMedQA*) and MedQuAD's held-out documents (the split medr2.search.rerank_data
    # leaves out). The corpus keeps every document (the others are distractors).
    test = set(json.loads((DATA / "benchmarks/pubmedqa/test_ground_truth.json").read_text()))
    return {
        "pubmedqa": [(pq[p]["QUESTION"], f"pmid:{p}") for p in pmids if p in test],
        "medquad": [(r["question"], f"jsonl:{r['qid']}") for r in medquad
                    if split_of(str(r.get("doc_id") or r["focus"]), MEDQUAD_HELD_OUT) == "test"],
    }


class ZeroEncoder:
    """Measurement stand-in: returns zero vectors so ingestion cost without the encoder shows."""

    def __init__(self, dim: int):
        self.dim = dim

    def encode_passages(self, texts, show_progress=False):
        return np.zeros((len(texts), self.dim), dtype=np.float32)


def timed_ingest(index_dir: Path, corpus: Path, cfg: Config, encoder=None) -> tuple[Index, float, int]:
    if index_dir.exists():
        shutil.rmtree(index_dir)
    idx = Index.open(index_dir, cfg, create=True, writable=True)
    if encoder is not None:
        idx._encoder = encoder
    t = time.perf_counter()
    rep = ingest(idx, [corpus], progress=sys.stderr.isatty())
    return idx, time.perf_counter() - t, rep.passages_added


def gold_rows(idx: Index, doc_id: str) -> set[int]:
    return {r[0] for r in idx.store.db.execute("SELECT rowid FROM passages WHERE doc_id=?", (doc_id,))}


def evaluate(searcher: HybridSearcher, queries, k_eval: int = 10, with_splade: bool = False):
    idx = searcher.index
    methods = ["bm25", "dense", "union", "rrf"] + (["splade"] if with_splade else [])
    per = {m: {"recall": [], "ndcg": [], "mrr": []} for m in methods}
    latencies = []
    for q, doc_id in queries:
        gold = {str(r) for r in gold_rows(idx, doc_id)}
        if not gold:
            continue
        t = time.perf_counter()
        cands = searcher.candidates(q)
        latencies.append((time.perf_counter() - t) * 1000)
        rankings = {
            "bm25": [i for i, c in sorted(cands.items(), key=lambda x: x[1]["sparse_rank"] or 1e9) if c["sparse_rank"]],
            "dense": [i for i, c in sorted(cands.items(), key=lambda x: x[1]["dense_rank"] or 1e9) if c["dense_rank"]],
            "union": [i for i, _ in fuse(dict(cands), "union")],
            "rrf": [i for i, _ in fuse(dict(cands), "rrf", searcher.config.fusion.rrf_k)],
        }
        if with_splade:
            rankings["splade"] = [i for i, c in sorted(cands.items(), key=lambda x: x[1].get("splade_rank") or 1e9)
                                  if c.get("splade_rank")]
        for m in methods:
            ranked = [str(i) for i in rankings[m]]
            per[m]["recall"].append(recall_at_k(ranked, gold, k_eval))
            per[m]["ndcg"].append(ndcg_at_k(ranked, gold, k_eval))
            per[m]["mrr"].append(mrr(ranked, gold))
    table = {m: {k: mean(v) for k, v in d.items()} for m, d in per.items()}
    return table, latencies, len(per[methods[0]]["recall"])


def evaluate_ranked(engine, queries, k_eval: int = 10):
    """The shipped reranker over the fused top 30, and medr2's evidence order (offline
    formulation expanding retrieval, the reranker reading the question, the fine appraisal with
    f_u = 0 as without a scorer): the order of the coarse set, the paper's F order of the same
    rows, and what reaches the context (rows above the relevance floor). Per-stage latency."""
    from medr2.appraise.order import paper_order

    idx, searcher = engine.index, engine.searcher
    coarse_k, top_n = engine.config.appraise.coarse_k, engine.config.rerank.top_n
    names = [f"reranker (fused top {top_n})", "medr2 evidence order", "medr2, paper F order", "medr2 context (floor)"]
    per = {m: {"recall": [], "ndcg": [], "mrr": []} for m in names}
    lat = {s: [] for s in ("pool", "rerank", "formulate", "retrieve (expanded)", "coarse rerank", "appraise")}
    for q, doc_id in queries:
        gold = {str(r) for r in gold_rows(idx, doc_id)}
        if not gold:
            continue
        notes: list[str] = []
        t = time.perf_counter()
        pool = searcher.pool(q, top_n)
        t1 = time.perf_counter()
        reranked = searcher.reranker.rerank(q, pool, top_n)
        t2 = time.perf_counter()
        f = engine.formulator.formulate(q, reformulate=True)
        t3 = time.perf_counter()
        expanded = engine.retrieve([f.query, q] if f.query != q else [q], coarse_k)
        t4 = time.perf_counter()
        hits = engine.rerank(q, expanded, coarse_k, notes)
        t5 = time.perf_counter()
        rows, _ = engine.appraiser.appraise(q, {}, f.question_type, hits, searcher.vectors(hits) if hits else None,
                                            None, notes)
        t6 = time.perf_counter()
        for s_, a, b in (("pool", t, t1), ("rerank", t1, t2), ("formulate", t2, t3),
                         ("retrieve (expanded)", t3, t4), ("coarse rerank", t4, t5), ("appraise", t5, t6)):
            lat[s_].append((b - a) * 1000)
        rid = idx.store.rowid_of
        rankings = {
            names[0]: [rid(h.passage_id) for h in reranked],
            names[1]: [rid(r.passage_id) for r in rows],
            names[2]: [rid(r.passage_id) for r in paper_order(rows)],
            names[3]: [rid(r.passage_id) for r in rows if not r.reason.startswith("dropped")],
        }
        for m in names:
            ranked = [str(i) for i in rankings[m]]
            per[m]["recall"].append(recall_at_k(ranked, gold, k_eval))
            per[m]["ndcg"].append(ndcg_at_k(ranked, gold, k_eval))
            per[m]["mrr"].append(mrr(ranked, gold))
    return {m: {k: mean(v) for k, v in d.items()} for m, d in per.items()}, lat


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=sorted(SCALES), default="default")
    ap.add_argument("--splade", default="", help="SPLADE model ('bundled:splade-tiny' or a path); off by default")
    ap.add_argument("--reuse-index", action="store_true",
                    help="use the index a previous run left in bench/out/SCALE/index (no ingestion-cost section)")
    ap.add_argument("--reranker", default="",
                    help="coarse reranker of section 4 (a `medr2 train-reranker` output folder or hub id); "
                         "default: the shipped one")
    ap.add_argument("--dense-model", default="",
                    help="dense encoder of the index (e.g. bundled:all-MiniLM-L6-v2-int8); its own work folder "
                         "bench/out/SCALE-MODEL; default: the configured one")
    ap.add_argument("--passage-precision", default="", choices=["", "auto", "fp32", "bf16"],
                    help="dense.passage_precision of the index (bf16 passage batches on torch); its own work "
                         "folder bench/out/SCALE-passages-PRECISION; default: the configured one")
    args = ap.parse_args()
    if not DATA.exists():
        print(f"needs ../shared/data (looked at {DATA})", file=sys.stderr)
        return 2
    scale = SCALES[args.scale]
    work = OUT / args.scale
    if args.dense_model:
        work = OUT / f"{args.scale}-{args.dense_model.split(':')[-1].lower()}"
    if args.passage_precision:
        work = work.parent / f"{work.name}-passages-{args.passage_precision}"
    corpus = work / "corpus"
    if corpus.exists():
        shutil.rmtree(corpus)
    gold = build_corpus(scale, corpus)
    cfg = Config()
    cfg.sparse.splade_model = args.splade
    if args.dense_model:
        cfg.dense.model = args.dense_model
    if args.passage_precision:
        cfg.dense.passage_precision = args.passage_precision
    cfg.fusion.dense_k = cfg.fusion.sparse_k = 100

    cost = not args.reuse_index
    if cost:
        # 1. ingestion without the encoder (zero vectors), then with it
        probe = Index.open(work / "probe", cfg, create=True, writable=True)
        dim = probe.encoder.dim
        encoder = probe.encoder
        probe.close()
        shutil.rmtree(work / "probe")
        bare = cfg.model_copy(deep=True)
        bare.sparse.splade_model = ""  # model-free ingestion cost: no SPLADE either
        idx0, t_noembed, n0 = timed_ingest(work / "index-noembed", corpus, bare, ZeroEncoder(dim))
        idx0.close()
        shutil.rmtree(work / "index-noembed")
        idx, t_full, n = timed_ingest(work / "index", corpus, cfg)

        # 2. the raw encoder on the same texts, same batch size
        rows = idx.store.db.execute(
            "SELECT p.text, p.heading_path, d.title FROM passages p JOIN documents d USING (doc_id) ORDER BY p.rowid"
        ).fetchall()
        sample = rows[: min(len(rows), 3000)]
        from medr2.schema import Passage

        texts = [Passage(passage_id="x", doc_id="x", text=t, heading_path=json.loads(h)).embedding_text(title)
                 for t, h, title in sample]
        t = time.perf_counter()
        encoder.encode_passages(texts)
        if idx.splade is not None:  # the pipeline runs both models: compare with both
            for i in range(0, len(texts), 256):
                idx.splade.encode(texts[i:i + 256])
        raw_rate = len(texts) / (time.perf_counter() - t)

    else:
        idx = Index.open(work / "index", cfg)
        n = idx.stats()["passages"]

    # 3. quality and latency
    rng = random.Random(7)
    searcher = HybridSearcher(idx, reranker=FusedOrder())  # candidates only; the reranker is section 4's
    results = {}
    lat_all = []
    for task, qs in gold.items():
        qs = list(qs)
        rng.shuffle(qs)
        table, lat, nq = evaluate(searcher, qs[: scale["queries"]], with_splade=bool(args.splade))
        results[task] = (table, nq)
        lat_all.extend(lat)
    st = idx.stats()
    idx.close()

    # 4. the shipped reranker and medr2's evidence order, on the same queries
    from medr2.pipelines import Engine

    ecfg = cfg.model_copy(deep=True)
    ecfg.formulate.method = "offline"
    if args.reranker:
        ecfg.rerank.cross_encoder = args.reranker
    engine = Engine.open(work / "index", ecfg, generator="none", scorer="none")
    rng = random.Random(7)
    ranked, stage_lat = {}, {}
    for task, qs in gold.items():
        qs = list(qs)
        rng.shuffle(qs)
        ranked[task], lat = evaluate_ranked(engine, qs[: scale["queries"]])
        for k_, v in lat.items():
            stage_lat.setdefault(k_, []).extend(v)
    reranker = engine.model_names()["coarse_reranker"]
    engine.close()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    # 4. report
    print(f"# medr2 retrieval benchmark ({args.scale})\n")
    print(f"Date {date.today().isoformat()}; machine: {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; dense model {cfg.dense.model}; "
          f"{st['documents']:,} documents, {st['passages']:,} passages.\n")
    for task, (table, nq) in results.items():
        print(f"## {task} ({nq} queries)\n")
        print("| retriever | Recall@10 | nDCG@10 | MRR |")
        print("|---|---:|---:|---:|")
        for m, v in {**table, **ranked[task]}.items():
            print(f"| {m} | {v['recall']:.3f} | {v['ndcg']:.3f} | {v['mrr']:.3f} |")
        print()
    print(f"Reranker: {reranker}; medr2 order: offline formulation expanding retrieval, coarse k "
          f"{ecfg.appraise.coarse_k}, fine appraisal order {ecfg.appraise.order!r} (w = "
          f"{ecfg.appraise.relevance_weight}, floor {ecfg.appraise.relevance_floor}), f_u = 0.\n")
    print("## Latency per stage (ms, all queries of both tasks)\n")
    print("| stage | p50 | p95 |")
    print("|---|---:|---:|")
    for k_, v in stage_lat.items():
        print(f"| {k_} | {percentile(v, 50):.1f} | {percentile(v, 95):.1f} |")
    print()
    if not cost:
        return 0
    full_rate, noembed_rate = n / t_full, n0 / t_noembed
    print("## Throughput and cost\n")
    print("| measure | value |")
    print("|---|---:|")
    print(f"| ingest passages/s, with embedding | {full_rate:.1f} |")
    print(f"| ingest passages/s, models replaced by zero vectors | {noembed_rate:.1f} |")
    models = "dense encoder" + (" + SPLADE" if args.splade else "")
    print(f"| raw {models} passages/s (same texts, batch {cfg.dense.batch_size}) | {raw_rate:.1f} |")
    print(f"| pipeline / raw encoder (target >= 0.85) | {full_rate / raw_rate:.2f} |")
    print(f"| query latency p50 / p95 (ms, dense + BM25 candidates, {st['passages']:,} passages) | "
          f"{percentile(lat_all, 50):.1f} / {percentile(lat_all, 95):.1f} |")
    d = st["disk_bytes"]
    print(f"| index on disk (store / segments) | {d['store'] / 1e6:.1f} MB / {d['segments'] / 1e6:.1f} MB |")
    print(f"| index in memory (segments) | {st['memory_bytes'] / 1e6:.1f} MB |")
    print(f"| benchmark process peak RSS | {rss_mb:.0f} MB |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
