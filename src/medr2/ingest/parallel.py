"""Parallel bulk ingestion: batches embedded and tokenised by worker processes (or Ray actors
on a cluster) while one writer commits them in order.

Reading and segmenting files stays in the writer, which keeps every guarantee of
``medr2.ingest.pipeline`` (unchanged files skipped by hash, a file marked done in the
transaction of its last batch, a killed run resuming from its committed batches). The models
run in the workers: each loads the index's dense encoder, tokenizer and SPLADE model once and
gets ``torch`` threads = cores / workers. At most ``2 x workers`` batches are in flight, so
memory stays bounded however large the corpus.

``ingest.executor = "ray"`` runs the workers as Ray actors (``pip install ray``; the cluster
from ``RAY_ADDRESS`` or a local one); every node needs medr2 and the models installed.

Example::

    >>> from medr2.config import Config
    >>> from medr2.ingest.parallel import EncoderPool        # doctest: +SKIP
    >>> pool = EncoderPool(Config(), workers=2)               # doctest: +SKIP
    >>> pool.submit(["Metformin in CKD"], ["en"]).result().vectors.shape   # doctest: +SKIP
    (1, 384)
"""

from __future__ import annotations

import os
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Optional

from medr2.config import Config

_STATE: dict = {}


def _threads(workers: int) -> int:
    return max(1, (os.cpu_count() or 1) // max(workers, 1))


def _init_worker(config_json: str, threads: int) -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:  # pragma: no cover - torch is a dependency
        pass
    _STATE["config"] = Config.model_validate_json(config_json)


def _models():
    if "encoder" not in _STATE:
        from medr2.index.dense import load_encoder
        from medr2.index.sparse import Tokenizer

        cfg = _STATE["config"]
        _STATE["encoder"] = load_encoder(cfg.dense)
        _STATE["tokenizer"] = Tokenizer(cfg.sparse)
        _STATE["splade"] = None
        if cfg.sparse.splade_model:
            from medr2.index.splade import SpladeEncoder

            _STATE["splade"] = SpladeEncoder(cfg.sparse.splade_model, cfg.dense.device)
    return _STATE["encoder"], _STATE["tokenizer"], _STATE["splade"]


def encode_texts(texts: list[str], languages: list[str]):
    """Worker side: the ``Encoded`` of one batch."""
    from medr2.index.index import Encoded

    encoder, tokenizer, splade = _models()
    return Encoded(encoder.encode_passages(texts), [tokenizer.tokens(t, lang) for t, lang in zip(texts, languages)],
                   splade.encode(texts) if splade is not None else None)


class EncoderPool:
    """``submit(texts, languages) -> Future[Encoded]`` on local processes or Ray actors."""

    def __init__(self, config: Config, workers: int, executor: str = "local"):
        self.workers = max(1, workers)
        self.executor = executor
        cfg_json = config.model_dump_json()
        threads = _threads(self.workers)
        if executor == "ray":
            self._actors = _ray_actors(cfg_json, self.workers, threads)
            self._next = 0
            self._pool: Optional[ProcessPoolExecutor] = None
        elif executor == "local":
            import multiprocessing as mp

            # spawn: a forked torch/FAISS process state is not safe to reuse in children
            self._pool = ProcessPoolExecutor(self.workers, mp_context=mp.get_context("spawn"),
                                             initializer=_init_worker, initargs=(cfg_json, threads))
        else:
            raise ValueError(f"unknown ingest.executor {executor!r}; use 'local' or 'ray'")

    def submit(self, texts: list[str], languages: list[str]) -> Future:
        if self._pool is not None:
            return self._pool.submit(encode_texts, texts, languages)
        actor = self._actors[self._next % len(self._actors)]
        self._next += 1
        return actor.encode.remote(texts, languages).future()

    def close(self, cancel: bool = False) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=not cancel, cancel_futures=cancel)
            self._pool = None


def _ray_actors(cfg_json: str, workers: int, threads: int):
    try:
        import ray
    except ImportError:
        raise RuntimeError("ingest.executor = 'ray' needs Ray: pip install ray (and medr2 on every node), "
                           "or use the local executor") from None
    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS") or None, ignore_reinit_error=True,
                 log_to_driver=False)

    @ray.remote(num_cpus=threads)
    class _Encoder:
        def __init__(self):
            _init_worker(cfg_json, threads)

        def encode(self, texts, languages):
            return encode_texts(texts, languages)

    return [_Encoder.remote() for _ in range(workers)]
