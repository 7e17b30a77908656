"""The trained study-design detector: TF-IDF over words and word pairs with a multinomial
logistic regression (run in numpy), trained on weak labels from public data by ``medr2
train-design`` (:mod:`medr2.appraise.train_design`; labels in
:mod:`medr2.appraise.design_labels`) and shipped in ``medr2/models/design/design.npz``.

It reads the words a design leaves in an abstract beyond the phrases the cue rules know (a
questionnaire, a follow-up interval, rats, a matched control group). Besides study designs it
knows three kinds of non-study text (``guideline``, ``textbook``, ``encyclopedia``), so text
that is no study is not forced into a design; for a passage whose source type is ``paper``
only the designs a paper can have are kept (:data:`NOT_PAPER`) and renormalised.

Example (a toy model built by hand)::

    >>> import numpy as np
    >>> from medr2.appraise.design_model import DesignModel
    >>> from medr2.formulate.classify import OfflineClassifier
    >>> clf = OfflineClassifier({"rats": 0, "questionnaire": 1}, np.ones(2, np.float32),
    ...                         np.array([[4.0, 0], [0, 4.0], [0, 0]], np.float32), np.zeros(3, np.float32),
    ...                         ["laboratory or animal study", "cross-sectional study", "textbook"], 1, {})
    >>> m = DesignModel(clf)
    >>> p = m.proba("Rats were fed a high-fat diet.", "paper")
    >>> max(p, key=p.get), "textbook" in p
    ('laboratory or animal study', False)
"""

from __future__ import annotations

from pathlib import Path

from medr2.formulate.classify import OfflineClassifier
from medr2.util.shipped import model_file

SHIPPED_DESIGN_MODEL = ("design", "design.npz")  # under the medr2.models package
NOT_PAPER = frozenset({"textbook", "encyclopedia"})  # what a passage of a paper cannot be
_REBUILD = "rebuild it with `medr2 train-design --data ../shared/data --out DIR` (see src/medr2/models/design/README.md)"


class DesignModel:
    name = "trained"

    def __init__(self, classifier: OfflineClassifier):
        self.classifier = classifier

    @property
    def designs(self) -> list[str]:
        return list(self.classifier.classes)

    @property
    def meta(self) -> dict:
        return self.classifier.meta

    @classmethod
    def load(cls, path: str | Path = "") -> "DesignModel":
        """The model at ``path``, or the one shipped in the package (``path`` empty)."""
        with model_file(path, SHIPPED_DESIGN_MODEL, "study-design model", _REBUILD,
                        'set appraise.level_method = "cues"') as p:
            return cls(OfflineClassifier.load(p))

    def save(self, path: str | Path) -> None:
        self.classifier.save(path)

    def proba(self, text: str, source_type: str = "") -> dict[str, float]:
        """P(design | text); for ``paper`` passages without the non-paper kinds, renormalised."""
        p = self.classifier.proba(text)
        if source_type == "paper":
            p = {d: v for d, v in p.items() if d not in NOT_PAPER}
            s = sum(p.values())
            p = {d: v / s for d, v in p.items()} if s > 0 else p
        return p
