"""Train the document-type model (f_g) on weak labels from public data (``medr2 train-doctype``).

Steps: draw at most ``per_source`` passages per label rule and ``per_label`` per type, one per
document and rule (:func:`doc_type_examples`, rules in :mod:`medr2.appraise.weak_labels`),
embed them as the index does (title and heading path, then the passage) with the bundled
all-MiniLM-L6-v2, split by document into train and dev, choose the regularisation C by dev
accuracy and the softmax temperature by dev log-loss, refit on train + dev with that C, and
write the arrays (:class:`medr2.appraise.doc_type.DocTypeModel`, run in numpy) and
``card.json``. Documents held out for the evaluation set are never drawn. Seeded: the same data
and seed give the same model.

Example (the fitting step on toy vectors)::

    >>> import numpy as np
    >>> from medr2.appraise.train_doc_type import fit_model
    >>> rng = np.random.default_rng(0)
    >>> x = np.vstack([rng.normal([3, 0], 0.3, (20, 2)), rng.normal([0, 3], 0.3, (20, 2))])
    >>> m = fit_model(x, ["definition"] * 20 + ["command"] * 20, c=1.0, temperature=1.0, meta={})
    >>> p = m.proba(np.array([[3.0, 0.0]]))[0]
    >>> from medr2.formulate.labels import DOC_TYPES
    >>> DOC_TYPES[int(p.argmax())], float(p[DOC_TYPES.index("prediction")]) < 1e-9
    ('definition', True)
"""

from __future__ import annotations

import datetime as _dt
import json
import random
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from medr2.appraise.doc_type import DocTypeModel
from medr2.appraise.weak_labels import TRAINED_CORPORA, MEDQUAD_QTYPE_TYPES, Example, doc_type_label, heldout, is_dev, units
from medr2.formulate.labels import DOC_TYPES
from medr2.util.extras import require

C_GRID = (0.3, 1.0, 3.0, 10.0, 30.0, 100.0)
T_GRID = tuple(float(t) for t in np.exp(np.linspace(np.log(0.25), np.log(4.0), 25)))
ENCODER = "bundled:all-MiniLM-L6-v2"


def _source(unit) -> str:
    if unit.corpus == "medquad":
        return f"medquad:{unit.doc.meta.extra.get('qtype', '')}"
    if unit.corpus in ("pubmedqa", "ngc"):
        return f"{unit.corpus}:{(unit.passage.heading_path or [''])[-1]}"
    return unit.corpus


def _keep(corpus: str):
    if corpus == "medquad":
        return lambda d: not heldout(d.doc_id) and d.meta.extra.get("qtype", "") in MEDQUAD_QTYPE_TYPES
    return lambda d: not heldout(d.doc_id)


def doc_type_examples(data: str | Path, seed: int = 0, per_label: int = 160, per_source: int = 100,
                      corpora: tuple[str, ...] = TRAINED_CORPORA, log: Callable[[str], None] = lambda m: None
                      ) -> list[Example]:
    """Weakly labelled passages, at most one per (document, rule), ``per_source`` per rule and
    ``per_label`` per type, in a fixed order for a given seed."""
    rng = random.Random(seed)
    pools: dict[tuple[str, str], dict[str, list]] = defaultdict(lambda: defaultdict(list))
    for corpus in corpora:
        t = time.perf_counter()
        n = 0
        for u in units(Path(data), corpus, keep=_keep(corpus)):
            label = doc_type_label(u)
            if label:
                pools[(label, _source(u))][u.group].append(u)
                n += 1
        log(f"  {corpus}: {n} labelled passages ({time.perf_counter() - t:.0f} s)")
    by_label: dict[str, list[list[Example]]] = defaultdict(list)
    for (label, source) in sorted(pools):
        docs = sorted(pools[(label, source)])
        rng.shuffle(docs)
        picked = [rng.choice(pools[(label, source)][d]) for d in docs[:per_source]]
        by_label[label].append([Example(u.embedding_text(), label, source, u.group) for u in picked])
    out: list[Example] = []
    for label in DOC_TYPES:
        lists = by_label.get(label, [])
        taken: list[Example] = []
        while len(taken) < per_label and any(lists):  # round-robin over the rules of the type
            for lst in lists:
                if lst and len(taken) < per_label:
                    taken.append(lst.pop(0))
        out.extend(taken)
    return out


def fit_model(x: np.ndarray, y: list[str], c: float, temperature: float, meta: dict) -> DocTypeModel:
    """Multinomial logistic regression (balanced class weights) on the vectors, as a DocTypeModel."""
    require("sklearn", "train", "medr2 train-doctype")
    from sklearn.linear_model import LogisticRegression

    classes = sorted(set(y))
    if len(classes) < 2:
        raise ValueError(f"training needs at least two document types; got {classes}")
    clf = LogisticRegression(C=c, max_iter=3000, class_weight="balanced")
    clf.fit(x, y)
    coef, intercept = clf.coef_, clf.intercept_
    if len(clf.classes_) == 2:  # one logit for P(second class): as a softmax, +/- half of it
        coef, intercept = np.vstack([-coef / 2, coef / 2]), np.concatenate([-intercept / 2, intercept / 2])
    w = np.zeros((len(DOC_TYPES), x.shape[1]), dtype=np.float32)
    b = np.full(len(DOC_TYPES), DocTypeModel.UNSUPERVISED_BIAS, dtype=np.float32)
    for k, cls in enumerate(clf.classes_):
        w[DOC_TYPES.index(cls)] = coef[k]
        b[DOC_TYPES.index(cls)] = intercept[k]
    return DocTypeModel(w, b, temperature, meta)


def scores(model: DocTypeModel, x: np.ndarray, y: list[str]) -> dict:
    """Top-1 / top-3 accuracy and mean log-loss of a model on labelled vectors."""
    p = model.proba(x)
    gold = np.array([DOC_TYPES.index(t) for t in y])
    top3 = np.argsort(-p, axis=1)[:, :3]
    return {"n": len(y), "top1": round(float(np.mean(top3[:, 0] == gold)), 4),
            "top3": round(float(np.mean([g in row for g, row in zip(gold, top3)])), 4),
            "log_loss": round(float(-np.mean(np.log(np.clip(p[np.arange(len(y)), gold], 1e-12, 1)))), 4)}


def choose(x_tr: np.ndarray, y_tr: list[str], x_dev: np.ndarray, y_dev: list[str],
           log: Callable[[str], None] = lambda m: None) -> tuple[float, float, dict]:
    """C by dev top-1 accuracy (ties: the smaller C), then T by dev log-loss."""
    best: Optional[tuple[float, float, DocTypeModel]] = None
    for c in C_GRID:
        m = fit_model(x_tr, y_tr, c, 1.0, {})
        acc = scores(m, x_dev, y_dev)["top1"]
        log(f"  C={c:g}: dev top-1 {acc:.3f}")
        if best is None or acc > best[1]:
            best = (c, acc, m)
    c, _, m = best
    losses = []
    for t in T_GRID:
        m.temperature = t
        losses.append(scores(m, x_dev, y_dev)["log_loss"])
    m.temperature = T_GRID[int(np.argmin(losses))]
    dev = scores(m, x_dev, y_dev)
    p = m.proba(x_dev).argmax(axis=1)
    per = Counter(y_dev)
    hit = Counter(t for t, k in zip(y_dev, p) if DOC_TYPES[int(k)] == t)
    dev["per_type_top1"] = {t: round(hit[t] / per[t], 3) for t in sorted(per)}
    log(f"  chose C={c:g}, T={m.temperature:.3f}: dev top-1 {dev['top1']}, top-3 {dev['top3']}")
    return c, m.temperature, dev


def train_doc_typer(data: str | Path, out: str | Path, seed: int = 0, dev_fraction: float = 0.2,
                    per_label: int = 160, per_source: int = 100, encoder=None, dense_model: str = ENCODER,
                    corpora: tuple[str, ...] = TRAINED_CORPORA, log: Callable[[str], None] = lambda m: None,
                    progress: bool = False) -> dict:
    """Build the examples, embed (with ``encoder``, else the ``dense_model`` loaded here), choose
    C and T on the dev documents, refit, write ``out/doc_type.npz`` and ``out/card.json``;
    returns the card."""
    t0 = time.perf_counter()
    log("drawing weakly labelled passages")
    ex = doc_type_examples(data, seed, per_label, per_source, corpora, log)
    if len({e.label for e in ex}) < 2:
        raise ValueError(f"{data}: the rules labelled fewer than two document types; is it the shared data folder?")
    if encoder is None:
        from medr2.config import DenseConfig
        from medr2.index.dense import load_encoder

        encoder = load_encoder(DenseConfig(model=dense_model))
    log(f"embedding {len(ex)} passages with {encoder.name}")
    t = time.perf_counter()
    x = np.asarray(encoder.encode_passages([e.text for e in ex], show_progress=progress), dtype=np.float32)
    embed_s = time.perf_counter() - t
    dev = [is_dev(e.group, dev_fraction) for e in ex]
    tr_i = [i for i, d in enumerate(dev) if not d]
    dv_i = [i for i, d in enumerate(dev) if d]
    if not tr_i or not dv_i:
        raise ValueError(f"the split by document left {len(tr_i)} training and {len(dv_i)} dev passages")
    y = [e.label for e in ex]
    log(f"choosing C and T on {len(dv_i)} dev passages ({len(tr_i)} train)")
    c, temp, dev_scores = choose(x[tr_i], [y[i] for i in tr_i], x[dv_i], [y[i] for i in dv_i], log)
    meta = {"encoder": encoder.name, "dim": int(x.shape[1]), "c": c, "seed": seed}
    model = fit_model(x, y, c, temp, meta)
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    model.save(out / "doc_type.npz")
    card = {
        "model": "multinomial logistic regression (balanced class weights) on dense passage vectors",
        "trained": _dt.date.today().isoformat(), "seed": seed, "encoder": encoder.name, "dim": int(x.shape[1]),
        "examples": len(ex), "train": len(tr_i), "dev": len(dv_i), "dev_fraction": dev_fraction,
        "split": "by document (sha256 bucket); 10% of documents held out for the evaluation set",
        "c": c, "c_grid": list(C_GRID), "temperature": round(temp, 4), "dev": dev_scores,
        "final_fit": "train + dev with the chosen C and T",
        "per_type": dict(Counter(y)), "per_source": dict(sorted(Counter(f"{e.source} -> {e.label}" for e in ex).items())),
        "unsupervised_types": [t for t in DOC_TYPES if t not in set(y)],
        "embed_seconds": round(embed_s, 1), "seconds": round(time.perf_counter() - t0, 1),
        "per_label": per_label, "per_source_cap": per_source,
    }
    (out / "card.json").write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    log(f"wrote {out / 'doc_type.npz'} and card.json ({card['seconds']} s)")
    return card
