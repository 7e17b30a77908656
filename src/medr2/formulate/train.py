"""Train the offline EBM classifier on MedQuAD questions (``qtype`` mapped to EBM categories).

Held-out questions are split by MedQuAD document (all questions about one focus go to the
same side), so the held-out accuracy is not inflated by near-duplicate questions. Duplicate
question texts are dropped. Training needs scikit-learn; the exported artefact does not.

Example::

    >>> from medr2.formulate.train import split_of
    >>> split_of("0000123", 0.2) in ("train", "test")
    True
    >>> split_of("0000123", 0.2) == split_of("0000123", 0.2)     # a document's side is fixed
    True
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections import Counter
from pathlib import Path
from typing import Iterator

import numpy as np

from medr2.formulate.classify import OfflineClassifier
from medr2.formulate.labels import ebm_of_qtype
from medr2.ingest.loaders.records import strict_jsonl
from medr2.util.extras import require


class TrainingDataError(ValueError):
    """The labelled file cannot be used for training; the message names the file and the line."""


def split_of(group: str, test_fraction: float) -> str:
    h = int(hashlib.sha256(group.encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "test" if h < test_fraction else "train"


def read_medquad(path: str | Path) -> Iterator[tuple[str, str, str]]:
    """(question, ebm category, group) for each distinct question."""
    p = Path(path)
    if not p.is_file():
        raise TrainingDataError(f"{p} does not exist; give MedQuAD as JSON Lines with question and qtype fields")
    seen: set[str] = set()
    for where, r in strict_jsonl(p, TrainingDataError):
        try:
            q, qtype = str(r["question"]).strip(), str(r["qtype"])
        except (KeyError, TypeError) as e:
            raise TrainingDataError(f"{where}: not a MedQuAD record with question and qtype ({e})") from None
        key = " ".join(q.lower().split())
        if not q or key in seen:
            continue
        seen.add(key)
        yield q, ebm_of_qtype(qtype), str(r.get("doc_id") or r.get("focus") or key)


def held_out(path: str | Path, test_fraction: float = 0.2) -> list[tuple[str, str]]:
    return [(q, y) for q, y, g in read_medquad(path) if split_of(g, test_fraction) == "test"]


def train_ebm_classifier(path: str | Path, test_fraction: float = 0.2, max_features: int = 20000,
                         ngram_max: int = 2, c: float = 4.0) -> tuple[OfflineClassifier, dict]:
    require("sklearn", "train", "medr2 train-classifier")
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    rows = list(read_medquad(path))
    if len(rows) < 50:
        raise TrainingDataError(f"{path} holds {len(rows)} distinct questions; at least 50 are needed")
    train = [(q, y) for q, y, g in rows if split_of(g, test_fraction) == "train"]
    test = [(q, y) for q, y, g in rows if split_of(g, test_fraction) == "test"]
    if not train or not test:
        raise TrainingDataError(f"{path}: the split by document left {len(train)} training and {len(test)} held-out "
                                "questions; give questions from more documents (doc_id)")
    if len({y for _, y in train}) < 2:
        raise TrainingDataError(f"{path}: the training questions hold fewer than two EBM categories")
    vec = TfidfVectorizer(ngram_range=(1, ngram_max), min_df=2, sublinear_tf=True, max_features=max_features)
    x = vec.fit_transform([q for q, _ in train])
    clf = LogisticRegression(C=c, max_iter=2000)
    clf.fit(x, [y for _, y in train])
    terms = vec.get_feature_names_out()
    vocab = {str(t): i for i, t in enumerate(terms)}
    model = OfflineClassifier(vocab, vec.idf_.astype(np.float32), clf.coef_.astype(np.float32),
                              clf.intercept_.astype(np.float32), [str(k) for k in clf.classes_], ngram_max, {})
    # held-out accuracy of the exported (numpy, float16) model, the one that ships
    model.coef = model.coef.astype(np.float16).astype(np.float32)
    model.idf = model.idf.astype(np.float16).astype(np.float32)
    correct = Counter()
    total = Counter()
    for q, y in test:
        p = model.proba(q)
        total[y] += 1
        correct[y] += int(max(p, key=p.get) == y)
    acc = sum(correct.values()) / max(1, sum(total.values()))
    report = {
        "trained": _dt.date.today().isoformat(), "source": Path(path).name, "n_train": len(train),
        "n_test": len(test), "test_fraction": test_fraction, "split": "by MedQuAD document (sha256 of doc_id)",
        "held_out_accuracy": round(acc, 4),
        "per_class_accuracy": {k: round(correct[k] / total[k], 4) for k in sorted(total)},
        "test_counts": dict(sorted(total.items())),
        "note": "cost has no MedQuAD questions: a cue rule assigns it",
    }
    model.meta = report
    return model, report
