"""f_g document-type fit: a passage's probability distribution over the 16 document types,
summed over the types the question type expects (Med-R2).

* :class:`TrainedDocTyper` (offline, the default): a multinomial logistic regression on the
  passage's stored dense vector (all-MiniLM-L6-v2), trained on weak labels from public data by
  ``medr2 train-doctype`` (:mod:`medr2.appraise.train_doc_type`) and shipped in
  ``medr2/models/doc_type/`` (:class:`DocTypeModel`); its softmax is the distribution.
* :class:`EmbeddingDocTyper` (offline, zero-shot): softmax over cosine similarities between
  the passage and a description of each type, in the dense encoder's space.
* :class:`LLMDocTyper`: the generator gives a probability vector under a JSON schema,
  normalised here (the authors ask an LLM for a normalised vector).

Example::

    >>> from medr2.appraise.doc_type import doc_type_fit, softmax
    >>> dist = dict(zip(["definition", "comparison", "evaluation"], softmax([2.0, 1.0, 0.0], 1.0)))
    >>> round(doc_type_fit(dist, ["comparison", "evaluation"]), 3)
    0.335

A trained model maps a vector to the 16 types (here a toy one over 2-d vectors)::

    >>> import numpy as np
    >>> from medr2.appraise.doc_type import DocTypeModel, TrainedDocTyper
    >>> w = np.zeros((16, 2), dtype=np.float32); w[1] = [4.0, 0.0]; w[7] = [0.0, 4.0]
    >>> m = DocTypeModel(w, np.zeros(16, dtype=np.float32), 1.0, {"encoder": "toy", "dim": 2})
    >>> d = TrainedDocTyper(m).distributions(["a", "b"], np.array([[1.0, 0.0], [0.0, 1.0]]))
    >>> max(d[0], key=d[0].get), max(d[1], key=d[1].get), round(sum(d[0].values()), 6)
    ('definition', 'instruction', 1.0)
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from medr2.formulate.labels import DOC_TYPE_DESCRIPTIONS, DOC_TYPES
from medr2.llm.base import LLM, structured
from medr2.util.shipped import model_file

F_G_FLOOR = 1e-3  # f_g lies in (0, 1): a type distribution never gives exactly zero


def softmax(values: Sequence[float], temperature: float) -> list[float]:
    if temperature <= 0:
        raise ValueError("temperature must be positive")
    m = max(values)
    ex = [math.exp((v - m) / temperature) for v in values]
    s = sum(ex)
    return [e / s for e in ex]


def normalise(dist: dict[str, float]) -> dict[str, float]:
    """Clip negatives, fill missing types with 0 and scale to sum 1 (uniform if all zero)."""
    vals = {t: max(0.0, float(dist.get(t, 0.0) or 0.0)) for t in DOC_TYPES}
    s = sum(vals.values())
    if s <= 0:
        return {t: 1.0 / len(DOC_TYPES) for t in DOC_TYPES}
    return {t: v / s for t, v in vals.items()}


def doc_type_fit(dist: dict[str, float], expected: list[str]) -> float:
    """f_g = sum of the probabilities of the expected types, kept inside (0, 1)."""
    total = sum(dist.get(t, 0.0) for t in expected)
    return min(max(total, F_G_FLOOR), 1.0 - F_G_FLOOR)


class EmbeddingDocTyper:
    name = "embedding"

    def __init__(self, encoder, temperature: float = 0.05):
        self.encoder = encoder
        self.temperature = temperature
        texts = [f"A passage that {d}." for d in DOC_TYPE_DESCRIPTIONS.values()]
        self._types = np.asarray(encoder.encode_passages(texts), dtype=np.float32)

    def distributions(self, passages: list[str], vectors: Optional[np.ndarray] = None) -> list[dict[str, float]]:
        if not passages:
            return []
        v = vectors if vectors is not None else np.asarray(self.encoder.encode_passages(passages), dtype=np.float32)
        sims = v @ self._types.T
        return [dict(zip(DOC_TYPES, softmax(list(map(float, row)), self.temperature))) for row in sims]


class LLMDocTyper:
    name = "llm"
    SCHEMA = {"type": "object", "additionalProperties": False, "required": DOC_TYPES,
              "properties": {t: {"type": "number", "minimum": 0, "maximum": 1} for t in DOC_TYPES}}

    def __init__(self, llm: LLM):
        self.llm = llm

    def distributions(self, passages: list[str], vectors=None) -> list[dict[str, float]]:
        from medr2.appraise.prompts import doc_type_messages

        return [normalise(structured(self.llm, doc_type_messages(p), self.SCHEMA, max_tokens=300)) for p in passages]


SHIPPED_DOC_TYPE_MODEL = ("doc_type", "doc_type.npz")  # under the medr2.models package
_REBUILD = "rebuild it with `medr2 train-doctype --data ../shared/data --out DIR` (see src/medr2/models/doc_type/README.md)"


class DocTypeModel:
    """Softmax((W v + b) / T) over :data:`DOC_TYPES` for a dense vector v. Types the training data
    did not supervise have zero weights and a bias of :attr:`UNSUPERVISED_BIAS` (probability ~0:
    the model gives them nothing, so f_g never rests on a type it never saw)."""

    UNSUPERVISED_BIAS = -30.0

    def __init__(self, weights: np.ndarray, bias: np.ndarray, temperature: float, meta: dict[str, Any]):
        if weights.shape[0] != len(DOC_TYPES) or bias.shape != (len(DOC_TYPES),):
            raise ValueError(f"a document-type model has one row per type ({len(DOC_TYPES)}); got {weights.shape}")
        if temperature <= 0:
            raise ValueError("temperature must be positive")
        self.weights, self.bias, self.temperature, self.meta = weights, bias, float(temperature), meta

    @property
    def dim(self) -> int:
        return int(self.weights.shape[1])

    @classmethod
    def load(cls, path: str | Path = "") -> "DocTypeModel":
        """The model at ``path``, or the one shipped in the package (``path`` empty)."""
        with model_file(path, SHIPPED_DOC_TYPE_MODEL, "document-type model", _REBUILD,
                        'set appraise.doc_type_method = "embedding"') as p, np.load(p, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if meta.get("types") != DOC_TYPES:
                raise ValueError(f"{path or 'the shipped document-type model'} was trained for other types "
                                 f"({meta.get('types')}); {_REBUILD}")
            return cls(z["weights"].astype(np.float32), z["bias"].astype(np.float32), float(z["temperature"]), meta)

    def save(self, path: str | Path) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            np.savez_compressed(fh, weights=self.weights.astype(np.float32), bias=self.bias.astype(np.float32),
                                temperature=np.float64(self.temperature),
                                meta=np.array(json.dumps({**self.meta, "types": DOC_TYPES})))

    def proba(self, vectors: np.ndarray) -> np.ndarray:
        v = np.asarray(vectors, dtype=np.float32)
        if v.ndim != 2 or v.shape[1] != self.dim:
            raise ValueError(f"the document-type model reads {self.dim}-d vectors of {self.meta.get('encoder')}; got "
                             f"shape {v.shape}: set appraise.doc_type_method = \"embedding\" for another encoder")
        z = (v @ self.weights.T + self.bias) / self.temperature
        z = np.exp(z - z.max(axis=1, keepdims=True))
        return z / z.sum(axis=1, keepdims=True)


class TrainedDocTyper:
    """The passage's type distribution from :class:`DocTypeModel` on its stored vector (the
    encoder is used only when no vectors are given). The encoder must be the one the model was
    trained on: another encoder's vectors live in another space, so that is an error, not a
    silently meaningless distribution."""

    name = "trained"

    def __init__(self, model: DocTypeModel, encoder=None):
        want = str(model.meta.get("encoder", ""))
        name, dim = getattr(encoder, "name", None), getattr(encoder, "dim", None)
        if (name is not None and want and name.lower() != want.lower()) or (dim is not None and dim != model.dim):
            raise ValueError(f"the document-type model was trained on {want} vectors ({model.dim}-d); this index "
                             f"uses {name} ({dim}-d): set appraise.doc_type_method = \"embedding\" or train one "
                             "on your encoder with `medr2 train-doctype`")
        self.model, self.encoder = model, encoder

    def distributions(self, passages: list[str], vectors: Optional[np.ndarray] = None) -> list[dict[str, float]]:
        if not passages:
            return []
        if vectors is None:
            if self.encoder is None:
                raise ValueError("TrainedDocTyper needs the passages' vectors or an encoder")
            vectors = self.encoder.encode_passages(passages)
        return [dict(zip(DOC_TYPES, map(float, row))) for row in self.model.proba(vectors)]


def doc_typer_for(cfg, encoder, llm: Optional[LLM] = None):
    """The document typer an ``AppraiseConfig`` asks for (``doc_type_method``): "trained" (the
    model at ``doc_type_model``, or the shipped one), "embedding", "llm" (the zero-shot
    embedding typer when no generator is configured), or "auto": the trained model when the
    encoder is the one it was trained on, else the zero-shot embedding typer (``name`` says
    which)."""
    if cfg.doc_type_method == "llm" and llm is not None:
        return LLMDocTyper(llm)
    if cfg.doc_type_method == "trained":
        return TrainedDocTyper(DocTypeModel.load(cfg.doc_type_model), encoder)
    if cfg.doc_type_method == "auto":
        model = DocTypeModel.load(cfg.doc_type_model)
        want = str(model.meta.get("encoder", "")).lower()
        if str(getattr(encoder, "name", "")).lower() == want and getattr(encoder, "dim", None) == model.dim:
            return TrainedDocTyper(model, encoder)
    return EmbeddingDocTyper(encoder, cfg.doc_type_temperature)
