"""Latency of the shipped reranker on the top 30 fused candidates of real queries, int8 (the
default) and fp32, in one run; prints p50/p95 in ms. Needs the retrieval benchmark's index
(``python bench/retrieval.py``). Run it on an otherwise idle machine.

Usage::

    python bench/rerank_latency.py --queries 60
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from medr2.config import Config  # noqa: E402
from medr2.index.index import Index  # noqa: E402
from medr2.search.cross_encoder import load_cross_encoder  # noqa: E402
from medr2.search.hybrid import HybridSearcher  # noqa: E402
from medr2.search.rerank import FusedOrder  # noqa: E402
from medr2.util.retrieval_metrics import percentile  # noqa: E402

DATA = Path(os.environ.get("MEDR2_SHARED_DATA", ROOT.parent / "shared" / "data"))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--batch-sizes", nargs="*", type=int, default=[32],
                    help="rerank.batch_size values to time (int8)")
    ap.add_argument("--max-lengths", nargs="*", type=int, default=[0],
                    help="rerank.max_length values to time (int8; 0: the model card's)")
    args = ap.parse_args()
    test = sorted(json.loads((DATA / "benchmarks/pubmedqa/test_ground_truth.json").read_text()))
    pq = json.loads((DATA / "benchmarks/pubmedqa/ori_pqal.json").read_text())
    queries = [pq[p]["QUESTION"] for p in test[: args.queries]]
    idx = Index.open(ROOT / "bench/out/default/index", Config())
    s = HybridSearcher(idx, reranker=FusedOrder())
    pools = [[h.embedding_text() for h in s.pool(q, 30)[:30]] for q in queries]
    idx.close()
    print(f"| model | p50 ms | p95 ms | queries |\n|---|---:|---:|---:|")
    runs = [(True, b, m) for b in args.batch_sizes for m in args.max_lengths] + [(False, 32, 0)]
    for quantize, batch, max_length in runs:
        ce = load_cross_encoder("bundled:medr2-reranker", quantize=quantize, batch_size=batch, max_length=max_length)
        ce.logits(queries[0], pools[0])  # warm-up
        lat = []
        for q, texts in zip(queries, pools):
            t = time.perf_counter()
            ce.logits(q, texts)
            lat.append((time.perf_counter() - t) * 1000)
        print(f"| {'int8' if quantize else 'fp32'}, top 30, batch {batch}, max length {ce.max_length} | "
              f"{percentile(lat, 50):.0f} | "
              f"{percentile(lat, 95):.0f} | {len(lat)} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
