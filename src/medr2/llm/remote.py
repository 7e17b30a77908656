"""OpenAI-compatible HTTP backend: vLLM, SGLang, Ollama, llama.cpp server, LM Studio, OpenAI.

Timeouts, retries with exponential backoff (connection errors, timeouts, 429 and 5xx), and a
concurrency limit shared by all threads using the backend; a read timeout is not retried (a
stuck server would otherwise cost retries x timeout per call). Structured output asks the
server for ``response_format: json_schema``, then for llama-cpp-python's ``json_object`` +
``schema`` form, then states the schema in the prompt (:data:`SCHEMA_MODES`); the answer is
validated either way by :func:`structured`. Continuation log-probabilities use ``/completions``
with ``echo`` and ``logprobs`` (vLLM; Ollama has none), checked first on a probe that any model
scores near certain: a server that gives none, or values that are not the prompt's own tokens'
(llama-cpp-python's server 0.3.x), raises a clear :class:`LLMError`.

Example::

    >>> from medr2.llm.remote import OpenAICompatLLM                                  # doctest: +SKIP
    >>> lm = OpenAICompatLLM("http://localhost:8000/v1", model="Qwen/Qwen2.5-7B-Instruct")  # doctest: +SKIP
    >>> lm.chat([{"role": "user", "content": "Say hi"}], max_tokens=5)["text"]      # doctest: +SKIP
    'Hi!'
"""

from __future__ import annotations

import http.client
import json
import math
import random
import socket
import threading
import time
import urllib.error
import urllib.request
from typing import Any, Optional

from medr2.llm.base import ContextWindowError, LLMError, NoLogprobsError, Usage, json_only_instruction, record
from medr2.llm.cache import LLMCache, cached

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}
# How a JSON schema is sent, tried in this order: OpenAI's and vLLM's `json_schema`, then the
# `json_object` + `schema` form of llama-cpp-python's server (it answers `json_schema` with a
# validation error), then the schema stated in the prompt.
SCHEMA_MODES = ("json_schema", "json_object", "prompt")
# A continuation any language model scores near certain, and the least mean log-probability per
# token a server must give it before its echoed log-probabilities are used (ours: SmolLM2-135M
# scores it at -0.02 a token through llama.cpp directly; llama-cpp-python 0.3.36's server at -14).
ECHO_PROBE = ("1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,", " 12, 13, 14, 15")
ECHO_PROBE_MIN = -1.5


def response_format(mode: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The request's ``response_format`` for a schema mode.

    >>> response_format("json_object", {"type": "object"})
    {'type': 'json_object', 'schema': {'type': 'object'}}
    """
    if mode == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": "medr2", "schema": schema, "strict": True}}
    return {"type": "json_object", "schema": schema}


def refuses_schema(e: "_HTTPStatus") -> bool:
    """The server refused the request's ``response_format`` (HTTP 400 or 422, or the 500 that
    llama-cpp-python's server gives a body it cannot validate), not something else."""
    about = any(w in str(e).lower() for w in ("response_format", "json_schema", "schema", "grammar", "guided"))
    return about and e.code in (400, 422, 500)


class OpenAICompatLLM:
    def __init__(self, base_url: str, model: str = "", api_key: str = "", timeout_s: float = 120.0,
                 retries: int = 3, backoff_s: float = 1.0, concurrency: int = 4, seed: int = 0,
                 cache: Optional[LLMCache] = None, n_ctx: int = 8192, temperature: float = 0.0):
        if not base_url.startswith(("http://", "https://")):
            raise LLMError(f"LLM endpoint {base_url!r} is not an http(s) URL")
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key = api_key
        self.timeout_s = timeout_s
        self.retries = retries
        self.backoff_s = backoff_s
        self.seed = seed
        self.temperature = temperature
        self.n_ctx = n_ctx  # the server's context, as configured (llm.n_ctx): evidence packing fits it
        self.cache = cache
        self.usage = Usage()
        self._slots = threading.BoundedSemaphore(max(1, concurrency))
        self._schema_mode = "json_schema"  # the next of SCHEMA_MODES when the server refuses it
        self._tokenize_ok: Optional[bool] = None
        self._echo_checked = False  # the echoed log-probabilities passed the probe (continuation_logprobs)
        self.name = f"http:{self.base_url}#{model or 'default'}"

    # -- transport -------------------------------------------------------------------------
    def _post(self, path: str, body: dict[str, Any], root: bool = False) -> dict[str, Any]:
        base = self.base_url
        if root and base.endswith("/v1"):
            base = base[: -len("/v1")]
        url = base + path
        data = json.dumps(body).encode("utf-8")
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                time.sleep(self.backoff_s * (2 ** (attempt - 1)) * (0.5 + random.random() / 2))
            req = urllib.request.Request(url, data=data, headers=headers, method="POST")
            try:
                with self._slots, urllib.request.urlopen(req, timeout=self.timeout_s) as r:
                    raw = r.read()
            except urllib.error.HTTPError as e:
                detail = e.read()[:300].decode("utf-8", "replace")
                if e.code in RETRY_STATUS and "validation error" not in detail.lower():
                    # (llama-cpp-python's server answers a request it cannot parse with HTTP 500)
                    last = f"HTTP {e.code}: {detail}"
                    continue
                raise _HTTPStatus(e.code, f"{url} answered HTTP {e.code}: {detail}") from None
            except (TimeoutError, socket.timeout) as e:
                raise LLMError(f"LLM endpoint {url} did not answer within {self.timeout_s:g} s ({e}); raise "
                               "llm.timeout_s or check the server") from None
            except (urllib.error.URLError, ConnectionError, OSError, http.client.HTTPException) as e:
                reason = getattr(e, "reason", e)
                if isinstance(reason, (TimeoutError, socket.timeout)):
                    raise LLMError(f"LLM endpoint {url} did not answer within {self.timeout_s:g} s; raise "
                                   "llm.timeout_s or check the server") from None
                last = f"{type(reason).__name__}: {reason}"
                continue
            try:
                return json.loads(raw)
            except json.JSONDecodeError:
                last = f"the reply is not JSON: {raw[:120]!r}"
                continue
        raise LLMError(f"LLM endpoint {url} failed after {self.retries + 1} tries ({last}); check that the server "
                       "runs and the URL ends in /v1")

    # -- capabilities ----------------------------------------------------------------------
    @cached("chat")
    def chat(self, messages: list[dict[str, str]], max_tokens: int = 512, temperature: float = 0.0,
             seed: int = 0, json_schema: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        t = time.perf_counter()
        body: dict[str, Any] = {"messages": messages, "max_tokens": max_tokens, "temperature": temperature,
                                "seed": seed}
        if self.model:
            body["model"] = self.model
        while True:
            body.pop("response_format", None)
            body["messages"] = messages
            if json_schema is not None:
                if self._schema_mode == "prompt":  # the server takes no schema: it is stated in the prompt
                    body["messages"] = [*messages, {"role": "user", "content": json_only_instruction(json_schema)}]
                else:
                    body["response_format"] = response_format(self._schema_mode, json_schema)
            try:
                r = self._post("/chat/completions", body)
                break
            except _HTTPStatus as e:
                if "response_format" not in body or not refuses_schema(e):
                    raise window_error(e) from None
                self._schema_mode = SCHEMA_MODES[SCHEMA_MODES.index(self._schema_mode) + 1]
        try:
            text = r["choices"][0]["message"].get("content") or ""
        except (KeyError, IndexError, TypeError, AttributeError):
            raise LLMError(f"{self.name}: the reply has no choices[0].message: {str(r)[:200]}") from None
        usage = r.get("usage") or {}
        out = {"text": text, "prompt_tokens": int(usage.get("prompt_tokens") or 0),
               "completion_tokens": int(usage.get("completion_tokens") or 0),
               "finish_reason": r["choices"][0].get("finish_reason")}
        record(self.usage, out["prompt_tokens"], out["completion_tokens"], time.perf_counter() - t)
        return out

    @cached("continuation_logprobs")
    def continuation_logprobs(self, prompt: str, continuation: str) -> list[float]:
        if not continuation:
            raise LLMError("the continuation is empty")
        if not self._echo_checked:
            self._check_echo()
        t = time.perf_counter()
        lps = self._echo_logprobs(prompt, continuation)
        record(self.usage, len(lps), 0, time.perf_counter() - t)
        return lps

    def _echo_logprobs(self, prompt: str, continuation: str) -> list[float]:
        body: dict[str, Any] = {"prompt": prompt + continuation, "max_tokens": 1, "temperature": 0.0,
                                "echo": True, "logprobs": 1}
        if self.model:
            body["model"] = self.model
        try:
            r = self._post("/completions", body)
        except _HTTPStatus as e:
            raise NoLogprobsError(f"{e}; this endpoint cannot score continuations (use vLLM or a local GGUF as "
                                  "scorer)") from None
        return continuation_from_echo(r, continuation)

    def _check_echo(self) -> None:
        """Score a continuation every language model finds near certain; a server whose echoed
        log-probabilities are not those of the prompt's own tokens (llama-cpp-python's server
        0.3.x scores each token with the distribution that follows it, and leaves the
        generated token out) fails it, and is refused rather than used to rank options."""
        lps = self._echo_logprobs(*ECHO_PROBE)
        mean = sum(lps) / len(lps)
        if mean < ECHO_PROBE_MIN:
            raise NoLogprobsError(f"{self.name} echoes prompt log-probabilities that do not belong to the prompt's "
                                  f"tokens (mean {mean:.1f} per token on the counting probe {''.join(ECHO_PROBE)!r}, "
                                  f"any model scores above {ECHO_PROBE_MIN}); it cannot score continuations: use vLLM, "
                                  "or a local GGUF (llm.scorer = a .gguf path) as scorer, or answer with answer_mode = "
                                  "generate")
        self._echo_checked = True

    def count_tokens(self, text: str) -> int:
        if self._tokenize_ok is not False:
            try:
                body = {"prompt": text, "content": text}
                if self.model:
                    body["model"] = self.model
                r = self._post("/tokenize", body, root=True)
                toks = r.get("tokens")
                if isinstance(toks, list):
                    self._tokenize_ok = True
                    return len(toks)
                if isinstance(r.get("count"), int):
                    self._tokenize_ok = True
                    return int(r["count"])
            except (LLMError, _HTTPStatus):
                pass
            self._tokenize_ok = False
        # No tokenizer endpoint: a conservative estimate (English BPE averages ~4 chars a token).
        return max(1, math.ceil(len(text) / 3.5))


class _HTTPStatus(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code


# how OpenAI-compatible servers word a prompt that does not fit (vLLM, OpenAI: "maximum context
# length"; llama.cpp server: "exceeds the available context size"; others: "context window")
_WINDOW_WORDS = ("context length", "context size", "context window", "context_length_exceeded")


def window_error(e: _HTTPStatus) -> LLMError:
    """An HTTP error as an :class:`LLMError`, a :class:`ContextWindowError` when it says the
    prompt does not fit the model's context.

    >>> type(window_error(_HTTPStatus(400, "This model's maximum context length is 4096 tokens"))).__name__
    'ContextWindowError'
    """
    text = str(e)
    if e.code in (400, 413) and any(w in text.lower() for w in _WINDOW_WORDS):
        return ContextWindowError(text)
    return LLMError(text)


def continuation_from_echo(reply: dict[str, Any], continuation: str) -> list[float]:
    """Log-probabilities of the echoed tokens that spell ``continuation``, counted from the end.

    The last token is the one generated after the echo. Counting back from it avoids character
    offsets, which servers compute differently (BOS strings, byte-level tokens).

    >>> r = {"choices": [{"logprobs": {"tokens": ["Answer", ":", " yes", "!"], "token_logprobs": [None, -0.1, -0.7, -2.0]}}]}
    >>> continuation_from_echo(r, " yes")
    [-0.7]
    """
    try:
        lp = reply["choices"][0]["logprobs"]
        tokens, values = lp["tokens"], lp["token_logprobs"]
    except (KeyError, IndexError, TypeError):
        raise NoLogprobsError("the endpoint returned no prompt log-probabilities (echo + logprobs); it cannot "
                              "score continuations") from None
    if not tokens or len(tokens) != len(values):
        raise NoLogprobsError("the endpoint's log-probabilities are malformed")
    echoed = list(zip(tokens[:-1], values[:-1]))  # drop the generated token
    out: list[float] = []
    covered = 0
    target = len(continuation)
    for tok, v in reversed(echoed):
        if covered >= target:
            break
        if v is None:
            break
        out.append(float(v))
        covered += len(tok)
    if covered < target or not out:
        raise NoLogprobsError("the endpoint's log-probabilities do not cover the continuation")
    return list(reversed(out))
