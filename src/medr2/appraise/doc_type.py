"""f_g document-type fit: a passage's probability distribution over the 16 document types,
summed over the types the question type expects (Med-R2).

* :class:`EmbeddingDocTyper` (offline, zero-shot): softmax over cosine similarities between
  the passage and a description of each type, in the dense encoder's space.
* :class:`LLMDocTyper`: the generator gives a probability vector under a JSON schema,
  normalised here (the authors ask an LLM for a normalised vector).

Example::

    >>> from medr2.appraise.doc_type import doc_type_fit, softmax
    >>> dist = dict(zip(["definition", "comparison", "evaluation"], softmax([2.0, 1.0, 0.0], 1.0)))
    >>> round(doc_type_fit(dist, ["comparison", "evaluation"]), 3)
    0.335
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

import numpy as np

from medr2.formulate.labels import DOC_TYPE_DESCRIPTIONS, DOC_TYPES
from medr2.llm.base import LLM, structured

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
