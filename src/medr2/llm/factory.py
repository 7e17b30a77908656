"""Build a backend from a model spec (see :class:`medr2.config.LLMConfig`).

Example::

    >>> from medr2.config import LLMConfig
    >>> from medr2.llm.factory import load_llm
    >>> load_llm("none", LLMConfig()) is None
    True
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from medr2.config import Config, LLMConfig
from medr2.llm.base import LLM, LLMError
from medr2.llm.cache import LLMCache


def resolve_spec(spec: str) -> str:
    """``local`` means the bundled generator; MEDR2_LLM_URL overrides the configured generator."""
    spec = (spec or "").strip()
    if spec.lower() == "local":
        return "bundled:qwen2.5-1.5b"
    return spec


def load_llm(spec: str, cfg: LLMConfig, cache: Optional[LLMCache] = None) -> Optional[LLM]:
    spec = resolve_spec(spec)
    if not spec or spec.lower() == "none":
        return None
    threads = cfg.n_threads or (os.cpu_count() or 2)
    if spec.startswith(("http://", "https://")):
        from medr2.llm.remote import OpenAICompatLLM

        key = os.environ.get(cfg.api_key_env) or os.environ.get("OPENAI_API_KEY", "")
        model = os.environ.get("MEDR2_LLM_MODEL") or cfg.model
        return OpenAICompatLLM(spec, model=model, api_key=key, timeout_s=cfg.timeout_s, retries=cfg.retries,
                               backoff_s=cfg.backoff_s, concurrency=cfg.concurrency, seed=cfg.seed, cache=cache,
                               n_ctx=cfg.n_ctx, temperature=cfg.temperature)
    if spec.startswith("hf:"):
        from medr2.llm.hf import TransformersLLM

        lm = TransformersLLM(spec[3:], seed=cfg.seed, n_threads=threads, cache=cache)
        lm.temperature = cfg.temperature
        return lm
    if spec.startswith("bundled:") or spec.endswith(".gguf"):
        from medr2.llm.llamacpp import LlamaCppLLM

        lm = LlamaCppLLM(spec, n_ctx=cfg.n_ctx, n_threads=threads, seed=cfg.seed, cache=cache,
                         n_batch=cfg.n_batch, n_ubatch=cfg.n_ubatch, prefix_cache_mb=cfg.prefix_cache_mb,
                         prefix_store_mb=cfg.prefix_store_mb, grammar=cfg.grammar, stop_loops=cfg.stop_loops)
        lm.temperature = cfg.temperature
        return lm
    raise LLMError(f"unknown model spec {spec!r}: use bundled:NAME, a .gguf path, http(s)://HOST/v1, hf:PATH, "
                   "local or none")


def open_cache(cfg: LLMConfig, index_path: Optional[str | Path]) -> Optional[LLMCache]:
    if cfg.cache_path:
        return LLMCache(cfg.cache_path)
    if index_path is not None:
        return LLMCache(Path(index_path) / "llm-cache.sqlite")
    return None


@dataclass
class Models:
    """The generator, the usefulness scorer and their call cache, loaded once and shared by every
    engine over an index (the CLI's, the service's after each write)."""

    generator: Optional[LLM]
    scorer: Optional[LLM]
    cache: Optional[LLMCache]


def load_models(cfg: Config, index_path: Optional[str | Path], generator: Optional[str] = None,
                scorer: Optional[str] = None) -> Models:
    """The models an index's config names; ``generator`` / ``scorer`` override it, and
    MEDR2_LLM_URL overrides the configured generator. The scorer is loaded only when usefulness
    scoring is on and there is a generator (it needs the generator's draft as its reference).

    >>> from medr2.config import Config
    >>> cfg = Config()
    >>> cfg.llm.generator = "none"
    >>> m = load_models(cfg, None)
    >>> (m.generator, m.scorer, m.cache)
    (None, None, None)
    """
    cache = open_cache(cfg.llm, index_path)
    gen_spec = generator if generator is not None else (os.environ.get("MEDR2_LLM_URL") or cfg.llm.generator)
    gen = load_llm(gen_spec, cfg.llm, cache)
    sc = (load_llm(scorer if scorer is not None else cfg.llm.scorer, cfg.llm, cache)
          if cfg.appraise.usefulness and gen is not None else None)
    return Models(gen, sc, cache)
