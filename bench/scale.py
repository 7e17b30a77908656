"""Scale-out benchmark: the embedded index against Milvus Lite; prints markdown tables.

Two parts:

* ``--part backends``: the retrieval benchmark of ``retrieval.py`` (its default-scale index,
  ``bench/out/default/index``, built by ``python bench/retrieval.py``) copied to Milvus Lite
  by ``medr2 index migrate`` (no re-embedding), then the same queries on both: how many top-10
  lists are identical (exactly, and up to tied scores) per retriever, the metrics of each, query
  latency, and ingestion throughput of each backend on the same corpus with the models
  replaced by zero vectors (the backend's own cost; the encoder's is the same for both).
* ``--part scale``: indexes grown to 10k ... 1M passages of generated text, on both backends.
  Text: words drawn with Zipf-like frequencies from the vocabulary of the shared corpora
  (stemmed, as medr2 indexes them), 120 words a passage. Vectors: the normalised mean of fixed
  random word vectors of the passage's words, so that vectors cluster by shared words like
  real embeddings (the bundled encoder embeds about 20 passages/s on 2 cores: 1M real
  embeddings would take 14 hours here; the build times below exclude embedding). At each size:
  build time so far, resident memory of the process (Milvus Lite 3 runs inside it),
  disk, and query p50/p95 for dense top-50, BM25 top-50 and both.

Usage::

    python bench/scale.py --part backends
    python bench/scale.py --part scale --sizes 10000,100000,1000000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import sys
import time
from collections import Counter
from datetime import date
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from medr2.config import Config  # noqa: E402
from medr2.util.retrieval_metrics import percentile  # noqa: E402
from medr2.index.index import Encoded, Index, PendingDoc  # noqa: E402
from medr2.schema import Document, DocumentMeta, Passage, SourceType  # noqa: E402

DATA = Path(os.environ.get("MEDR2_SHARED_DATA", ROOT.parent / "shared" / "data"))
OUT = ROOT / "bench" / "out"


def rss_mb() -> float:
    """Resident memory of this process and any children (Milvus Lite 3 runs in a thread here)."""
    me = psutil.Process()
    total = me.memory_info().rss
    for c in me.children(recursive=True):
        try:
            total += c.memory_info().rss
        except psutil.Error:
            pass
    return total / 1e6


def du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def header() -> None:
    print(f"Date {date.today().isoformat()}; machine: {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}.\n")


# -- part 1: the same retrieval benchmark on both backends -------------------------------------------
def _tied(scores: list[float], n: int, tol: float) -> bool:
    return any(abs(scores[n] - scores[m]) <= tol for m in (n - 1, n + 1) if 0 <= m < len(scores))


def same_up_to_ties(a: list[tuple[int, float]], b: list[tuple[int, float]], tol: float) -> bool:
    if len(a) != len(b):
        return False
    if any(abs(x[1] - y[1]) > tol for x, y in zip(a, b)):
        return False
    scores = [s for _, s in a]
    return all(x[0] == y[0] or _tied(scores, n, tol) for n, (x, y) in enumerate(zip(a, b)))


def part_backends() -> int:
    from retrieval import SCALES, ZeroEncoder, build_corpus, evaluate, timed_ingest

    from medr2.index.migrate import migrate_to_milvus
    from medr2.search.fusion import fuse
    from medr2.search.hybrid import HybridSearcher

    src = OUT / "default" / "index"
    corpus = OUT / "default" / "corpus"
    if not (src / "store.sqlite").exists():
        print("needs bench/out/default/index: run `python bench/retrieval.py` first", file=sys.stderr)
        return 2
    work = OUT / "scale-backends"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    gold = build_corpus(SCALES["default"], work / "gold-corpus")  # the same seeded query sets
    t = time.perf_counter()
    n = migrate_to_milvus(src, "milvus-lite:" + str(work / "milvus" / "milvus.db"), work / "milvus")
    t_migrate = time.perf_counter() - t
    header()
    print(f"Index: `bench/out/default/index` ({n:,} passages) and its Milvus Lite copy "
          f"(migrated in {t_migrate:.1f} s, {n / t_migrate:,.0f} passages/s, no re-embedding).\n")
    k = 10
    tables, lat, same = {}, {}, {}
    with Index.open(src) as emb, Index.open(work / "milvus") as mil:
        for idx in (emb, mil):
            idx.config.fusion.dense_k = idx.config.fusion.sparse_k = 100
        queries = [q for task in ("pubmedqa", "medquad") for q in gold[task]]
        for name, idx in (("embedded", emb), ("milvus-lite", mil)):
            s = HybridSearcher(idx, reranker=_NoRerank())
            s.candidates(queries[0][0])  # warm
            tables[name], lat[name] = {}, []
            for task in ("pubmedqa", "medquad"):
                tables[name][task], times, _ = evaluate(s, gold[task])
                lat[name].extend(times)
        se, sm = HybridSearcher(emb, reranker=_NoRerank()), HybridSearcher(mil, reranker=_NoRerank())
        counts = {m: [0, 0] for m in ("bm25", "dense", "union", "rrf", "rrf by Milvus")}
        for q, _ in queries:
            ca, cb = se.candidates(q), sm.candidates(q)
            lists = {}
            for side, c in (("a", ca), ("b", cb)):
                lists[side] = {
                    "bm25": sorted(((i, v["sparse"]) for i, v in c.items() if v["sparse_rank"]), key=lambda x: -x[1]),
                    "dense": sorted(((i, v["dense"]) for i, v in c.items() if v["dense_rank"]), key=lambda x: -x[1]),
                    "union": fuse(dict(c), "union"),
                    "rrf": fuse(dict(c), "rrf", 60),
                }
            qv = emb.encoder.encode_query(q)
            lists["b"]["rrf by Milvus"] = mil.fuse_rrf(qv, emb.tokenizer.tokens(q), q, 100, 100, k, 60)
            lists["a"]["rrf by Milvus"] = lists["a"]["rrf"]
            for m in counts:
                a, b = lists["a"][m][:k], lists["b"][m][:k]
                counts[m][0] += [i for i, _ in a] == [i for i, _ in b]
                counts[m][1] += same_up_to_ties(a, b, 1e-4 if m in ("bm25", "dense") else 1e-6)
        same = {m: (v[0] / len(queries), v[1] / len(queries)) for m, v in counts.items()}
    print(f"#### Identical top-{k} lists ({len(queries)} queries: PubMedQA and MedQuAD sets of retrieval.py)\n")
    print("| retriever | identical | identical up to tied scores |\n|---|---:|---:|")
    for m, (a, b) in same.items():
        print(f"| {m} | {100 * a:.1f}% | {100 * b:.1f}% |")
    print("\n#### Metrics on each backend (Recall@10 / nDCG@10 / MRR)\n")
    print("| task | retriever | embedded | milvus-lite |\n|---|---|---:|---:|")
    for task in ("pubmedqa", "medquad"):
        for m in ("bm25", "dense", "union", "rrf"):
            cells = [" / ".join(f"{tables[b][task][m][x]:.3f}" for x in ("recall", "ndcg", "mrr"))
                     for b in ("embedded", "milvus-lite")]
            print(f"| {task} | {m} | {cells[0]} | {cells[1]} |")
    print("\n#### Cost\n")
    print("| measure | embedded | milvus-lite |\n|---|---:|---:|")
    print("| query latency p50 / p95 (ms; query encoding + dense + BM25 top-100) | "
          + " | ".join(f"{percentile(lat[b], 50):.1f} / {percentile(lat[b], 95):.1f}" for b in ("embedded", "milvus-lite"))
          + " |")
    rates = {}
    for b in ("embedded", "milvus"):
        cfg = Config()
        cfg.index.backend = b
        with Index.open(src) as probe:
            dim = probe.encoder.dim
        idx, secs, added = timed_ingest(work / f"ingest-{b}", corpus, cfg, ZeroEncoder(dim))
        idx._encoder = ZeroEncoder(dim)
        idx.close()
        rates[b] = added / secs
        shutil.rmtree(work / f"ingest-{b}", ignore_errors=True)
    print(f"| ingest passages/s, models replaced by zero vectors ({n:,} passages) | {rates['embedded']:,.0f} | "
          f"{rates['milvus']:,.0f} |")
    print(f"| index on disk (MB; store + vectors and terms) | {du_mb(src):.1f} | {du_mb(work / 'milvus'):.1f} |")
    return 0


class _NoRerank:
    """Candidate generation only: the cross-encoder is the same on both backends."""

    def rerank(self, query, hits, k):
        return hits[:k]


# -- part 2: scaling with generated passages ---------------------------------------------------------
def vocabulary(n_words: int = 30_000) -> list[str]:
    """Stemmed words of the shared corpora by frequency (the Zipf ranks of the generator)."""
    from medr2.index.sparse import Tokenizer

    tok = Tokenizer()
    counts: Counter = Counter()
    for rel in ("corpora/medquad/medquad.jsonl", "corpora/textbooks/anatomy_physiology_2e.jsonl",
                "corpora/guidelines/ngc_summaries.jsonl"):
        p = DATA / rel
        if not p.exists():
            continue
        with p.open(encoding="utf-8") as fh:
            for i, line in enumerate(fh):
                if i >= 20_000:
                    break
                counts.update(w for w in tok.tokens(line[:4000], "en") if re.fullmatch(r"[a-z]+", w))
    words = [w for w, _ in counts.most_common(n_words)]
    if len(words) < 1000:  # no shared data: a synthetic vocabulary
        words = [f"w{i}" for i in range(n_words)]
    return words


class Generator:
    def __init__(self, words: list[str], dim: int, seed: int = 0, length: int = 120):
        self.words = words
        self.rng = np.random.default_rng(seed)
        ranks = np.arange(1, len(words) + 1)
        p = 1.0 / ranks ** 1.05
        self.p = p / p.sum()
        self.length = length
        wv = np.random.default_rng(seed + 1).standard_normal((len(words), dim)).astype(np.float32)
        self.wv = wv / np.linalg.norm(wv, axis=1, keepdims=True)

    def vectors(self, idx: np.ndarray) -> np.ndarray:
        v = self.wv[idx].mean(axis=-2)
        return (v / np.linalg.norm(v, axis=-1, keepdims=True)).astype(np.float32)

    def batch(self, start: int, n: int) -> tuple[list[PendingDoc], Encoded]:
        idx = self.rng.choice(len(self.words), size=(n, self.length), p=self.p)
        docs, tokens = [], []
        for j in range(n):
            words = [self.words[i] for i in idx[j]]
            doc_id = f"gen:{start + j}"
            text = " ".join(words)
            doc = Document(doc_id=doc_id, title="", source_type=SourceType.paper,
                           meta=DocumentMeta(year=1990 + (start + j) % 35, language="en"), sections=[])
            p = Passage(passage_id=f"p{start + j:09d}", doc_id=doc_id, text=text, heading_path=[], start=0,
                        end=len(text), language="en", unit=0, ordinal=0)
            docs.append(PendingDoc(doc, [p], f"h{start + j}", replaces=False))
            tokens.append(words)
        return docs, Encoded(self.vectors(idx), tokens)

    def queries(self, n: int) -> list[tuple[np.ndarray, list[str]]]:
        rng = np.random.default_rng(99)
        out = []
        for _ in range(n):
            idx = rng.choice(np.arange(50, min(5000, len(self.words))), size=4, replace=False)
            out.append((self.vectors(idx[None, :])[0], [self.words[i] for i in idx]))
        return out


def part_scale(sizes: list[int], backends: list[str], batch: int) -> int:
    work = OUT / "scale"
    words = vocabulary()
    header()
    print(f"Generated passages: {len(words):,}-word stemmed vocabulary from the shared corpora, Zipf(1.05), "
          f"120 words each; 384-d vectors; 100 queries of 4 mid-frequency words; top-50 per retriever.\n")
    print("| backend | passages | build s (cumulative) | passages/s | memory MB | disk MB | dense p50/p95 ms "
          "| BM25 p50/p95 ms | dense+BM25 p50/p95 ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    sys.stdout.flush()
    for backend in backends:
        path = work / backend
        shutil.rmtree(path, ignore_errors=True)
        cfg = Config()
        cfg.index.backend = backend
        cfg.ingest.batch_passages = batch
        gen = Generator(words, 384)
        queries = gen.queries(100)
        built, secs = 0, 0.0
        with Index.open(path, cfg, create=True, writable=True) as idx:
            idx.store.set_meta("dense_dim", "384")
            idx._encoder = _Dim(384)
            for size in sizes:
                while built < size:
                    n = min(batch, size - built)
                    docs, enc = gen.batch(built, n)
                    t = time.perf_counter()
                    idx.commit(docs, encoded=enc)
                    secs += time.perf_counter() - t
                    built += n
                lat = {"dense": [], "bm25": [], "both": []}
                for qv, terms in queries[:5]:  # warm
                    idx.search_dense(qv, 50), idx.search_sparse(terms, 50)
                for qv, terms in queries:
                    t0 = time.perf_counter()
                    idx.search_dense(qv, 50)
                    t1 = time.perf_counter()
                    idx.search_sparse(terms, 50, text=" ".join(terms))
                    t2 = time.perf_counter()
                    lat["dense"].append((t1 - t0) * 1000)
                    lat["bm25"].append((t2 - t1) * 1000)
                    lat["both"].append((t2 - t0) * 1000)
                cells = [f"{percentile(lat[m], 50):.1f} / {percentile(lat[m], 95):.1f}" for m in ("dense", "bm25", "both")]
                print(f"| {backend} | {built:,} | {secs:.0f} | {built / secs:,.0f} | {rss_mb():,.0f} | "
                      f"{du_mb(path):,.0f} | " + " | ".join(cells) + " |")
                sys.stdout.flush()
        shutil.rmtree(path, ignore_errors=True)
    return 0


class _Dim:
    """The index asks its encoder only for the dimension when vectors come precomputed."""

    def __init__(self, dim: int):
        self.dim = dim


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["backends", "scale"], required=True)
    ap.add_argument("--sizes", default="10000,100000,1000000")
    ap.add_argument("--backends", default="embedded,milvus")
    ap.add_argument("--batch", type=int, default=20_000, help="passages per commit in the scale part")
    args = ap.parse_args()
    random.seed(0)
    if args.part == "backends":
        return part_backends()
    return part_scale([int(s) for s in args.sizes.split(",")], args.backends.split(","), args.batch)


if __name__ == "__main__":
    sys.exit(main())
