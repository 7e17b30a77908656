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
from medr2.eval.retrieval_metrics import mean, mrr, ndcg_at_k, percentile, recall_at_k  # noqa: E402
from medr2.index.index import Index  # noqa: E402
from medr2.ingest.pipeline import ingest  # noqa: E402
from medr2.search.fusion import fuse  # noqa: E402
from medr2.search.hybrid import HybridSearcher  # noqa: E402

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
    return {
        "pubmedqa": [(pq[p]["QUESTION"], f"pmid:{p}") for p in pmids],
        "medquad": [(r["question"], f"jsonl:{r['qid']}") for r in medquad],
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=sorted(SCALES), default="default")
    ap.add_argument("--splade", default="", help="SPLADE model ('bundled:splade-tiny' or a path); off by default")
    args = ap.parse_args()
    if not DATA.exists():
        print(f"needs ../shared/data (looked at {DATA})", file=sys.stderr)
        return 2
    scale = SCALES[args.scale]
    work = OUT / args.scale
    corpus = work / "corpus"
    if corpus.exists():
        shutil.rmtree(corpus)
    gold = build_corpus(scale, corpus)
    cfg = Config()
    cfg.sparse.splade_model = args.splade
    cfg.fusion.dense_k = cfg.fusion.sparse_k = 100

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

    # 3. quality and latency
    rng = random.Random(7)
    searcher = HybridSearcher(idx)
    results = {}
    lat_all = []
    for task, qs in gold.items():
        qs = list(qs)
        rng.shuffle(qs)
        table, lat, nq = evaluate(searcher, qs[: scale["queries"]], with_splade=bool(args.splade))
        results[task] = (table, nq)
        lat_all.extend(lat)
    st = idx.stats()
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    idx.close()

    # 4. report
    print(f"# medr2 retrieval benchmark ({args.scale})\n")
    print(f"Date {date.today().isoformat()}; machine: {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; dense model {cfg.dense.model}; "
          f"{st['documents']:,} documents, {st['passages']:,} passages.\n")
    for task, (table, nq) in results.items():
        print(f"## {task} ({nq} queries)\n")
        print("| retriever | Recall@10 | nDCG@10 | MRR |")
        print("|---|---:|---:|---:|")
        for m, v in table.items():
            print(f"| {m} | {v['recall']:.3f} | {v['ndcg']:.3f} | {v['mrr']:.3f} |")
        print()
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
