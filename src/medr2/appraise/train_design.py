"""Train the study-design model (``medr2 train-design``) and choose how it combines with the
cue rules, on weak labels from public data (:mod:`medr2.appraise.design_labels`).

Steps: split the examples by document into train and dev (``dev_fraction``); fit TF-IDF
(words and word pairs, sublinear tf) + multinomial logistic regression (balanced class weights)
for each C of :data:`C_GRID` and keep the best on dev accuracy; then choose the confidence at
which the model overrides the cue rules (``appraise.design_min_confidence``; only cues naming a
design with at least ``min_support`` training examples can be overridden) on the dev
PubMedQA abstracts (their MeSH labels are independent of the cue wording; the masked wording
examples are not used for this choice): each threshold of :data:`CONFIDENCE_GRID` is scored by
design accuracy, then level accuracy, ties going to the higher threshold (the cues keep more
say). Finally refit on train + dev with that C and write ``design.npz`` (run in numpy, no
scikit-learn needed) and ``card.json``.

Example (the selection rule on given dev scores)::

    >>> from medr2.appraise.train_design import pick_threshold
    >>> pick_threshold({0.5: (0.60, 0.62), 0.8: (0.60, 0.62), 1.01: (0.40, 0.45)})
    0.8
"""

from __future__ import annotations

import datetime as _dt
import json
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import numpy as np

from medr2.appraise.design_labels import design_examples
from medr2.appraise.design_model import DesignModel
from medr2.appraise.evidence_level import EvidenceLeveler
from medr2.appraise.weak_labels import Example, is_dev
from medr2.formulate.classify import OfflineClassifier
from medr2.util.extras import require

C_GRID = (1.0, 3.0, 10.0, 30.0, 100.0)
CONFIDENCE_GRID = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.01)  # 1.01: the cues first whenever they fire
MAX_FEATURES = 20000


def fit(texts: list[str], labels: list[str], c: float) -> DesignModel:
    require("sklearn", "train", "medr2 train-design")
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    vec = TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True, max_features=MAX_FEATURES)
    x = vec.fit_transform(texts)
    clf = LogisticRegression(C=c, max_iter=3000, class_weight="balanced")
    clf.fit(x, labels)
    coef, intercept = clf.coef_, clf.intercept_
    if len(clf.classes_) == 2:  # one logit for P(second class): as a softmax, +/- half of it
        coef, intercept = np.vstack([-coef / 2, coef / 2]), np.concatenate([-intercept / 2, intercept / 2])
    model = OfflineClassifier({str(t): i for i, t in enumerate(vec.get_feature_names_out())},
                              vec.idf_.astype(np.float32), coef.astype(np.float32),
                              intercept.astype(np.float32), [str(k) for k in clf.classes_], 2,
                              {"per_design": dict(Counter(labels))})
    # score what ships: float16 arrays (OfflineClassifier.save)
    model.coef = model.coef.astype(np.float16).astype(np.float32)
    model.idf = model.idf.astype(np.float16).astype(np.float32)
    return DesignModel(model)


def accuracy(model: DesignModel, ex: list[Example]) -> float:
    hits = 0
    for e in ex:
        p = model.proba(e.text)
        hits += max(p, key=p.get) == e.label
    return hits / max(1, len(ex))


def combined(leveler: EvidenceLeveler, ex: list[Example]) -> tuple[float, float]:
    """(design accuracy, level accuracy) of a leveler on dev abstracts, metadata withheld."""
    d = lv = 0
    for e in ex:
        r = leveler.assess("paper", [], "", e.text)
        d += r.design == e.label
        lv += r.level == leveler._level(e.label)
    return d / max(1, len(ex)), lv / max(1, len(ex))


def pick_threshold(scores: dict[float, tuple[float, float]]) -> float:
    """The threshold with the best (design, level) accuracy; ties to the higher threshold."""
    return max(scores, key=lambda t: (round(scores[t][0], 6), round(scores[t][1], 6), t))


def train_design_model(data: str | Path, out: str | Path, levels: dict[str, int], seed: int = 0,
                       dev_fraction: float = 0.25, not_study_per_class: int = 80, min_support: int = 10,
                       log: Callable[[str], None] = lambda m: None) -> dict:
    """Build the weak design examples, choose C and the override confidence on dev, refit,
    write ``out/design.npz`` and ``out/card.json``; returns the card."""
    t0 = time.perf_counter()
    log("reading weak design labels")
    ex = design_examples(data, seed, not_study_per_class)
    if len({e.label for e in ex}) < 2:
        raise ValueError(f"{data}: the rules labelled fewer than two designs; is it the shared data folder?")
    train = [e for e in ex if not is_dev(e.group, dev_fraction)]
    dev = [e for e in ex if is_dev(e.group, dev_fraction)]
    if not train or not dev:
        raise ValueError(f"the split by document left {len(train)} training and {len(dev)} dev examples")
    log(f"{len(ex)} examples ({len(train)} train, {len(dev)} dev): {dict(Counter(e.label for e in ex))}")
    best = None
    for c in C_GRID:
        m = fit([e.text for e in train], [e.label for e in train], c)
        acc = accuracy(m, dev)
        log(f"  C={c:g}: dev accuracy {acc:.3f}")
        if best is None or acc > best[1]:
            best = (c, acc, m)
    c, dev_acc, m = best
    dev_pq = [e for e in dev if e.source == "pubmedqa:mesh"]
    cues = combined(EvidenceLeveler(levels), dev_pq)
    sweep = {t: combined(EvidenceLeveler(levels, design_model=m, min_confidence=t, min_support=min_support), dev_pq)
             for t in CONFIDENCE_GRID}
    tau = pick_threshold(sweep)
    log(f"  cues alone on {len(dev_pq)} dev abstracts: design {cues[0]:.3f}, level {cues[1]:.3f}")
    for t, (d, lv) in sweep.items():
        log(f"  model at confidence >= {t:g}, else cues, else model: design {d:.3f}, level {lv:.3f}")
    log(f"chose C={c:g}, min confidence {tau:g}")
    final = fit([e.text for e in ex], [e.label for e in ex], c)
    card = {
        "model": "TF-IDF (1-2 grams, sublinear tf, min_df 2) + multinomial logistic regression (balanced)",
        "trained": _dt.date.today().isoformat(), "seed": seed, "examples": len(ex), "train": len(train),
        "dev": len(dev), "dev_fraction": dev_fraction, "split": "by document (sha256 bucket)",
        "per_design": dict(Counter(e.label for e in ex)),
        "per_source": dict(sorted(Counter(f"{e.source} -> {e.label}" for e in ex).items())),
        "c": c, "c_grid": list(C_GRID), "dev_model_accuracy": round(dev_acc, 4),
        "dev_pubmedqa_abstracts": len(dev_pq),
        "dev_cues_alone": {"design": round(cues[0], 4), "level": round(cues[1], 4)},
        "dev_confidence_sweep": {str(t): {"design": round(d, 4), "level": round(lv, 4)}
                                 for t, (d, lv) in sweep.items()},
        "min_confidence": tau, "min_support": min_support, "final_fit": "train + dev with the chosen C",
        "vocabulary": len(final.classifier.vocab),
        "seconds": round(time.perf_counter() - t0, 1),
    }
    final.classifier.meta = {**final.classifier.meta,
                             **{k: card[k] for k in ("trained", "seed", "examples", "c", "min_confidence")}}
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    final.save(out / "design.npz")
    (out / "card.json").write_text(json.dumps(card, indent=2) + "\n", encoding="utf-8")
    log(f"wrote {out / 'design.npz'} and card.json ({card['seconds']} s)")
    return card
