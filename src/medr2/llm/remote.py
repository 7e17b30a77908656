"""OpenAI-compatible HTTP backend: vLLM, SGLang, Ollama, llama.cpp server, LM Studio, OpenAI.

Timeouts, retries with exponential backoff (connection errors, timeouts, 429 and 5xx), and a
concurrency limit shared by all threads using the backend. Structured output asks the server
for ``response_format: json_schema``; a server that rejects it (HTTP 400) is asked again with the
schema stated in the prompt, and the answer is validated either way by :func:`structured`.
Continuation log-probabilities use ``/completions`` with ``echo`` and ``logprobs`` (vLLM and
other servers that echo prompt log-probabilities; the llama.cpp server and Ollama do not): a
server that gives none raises a clear :class:`LLMError`. A read timeout is not retried (a stuck
server would otherwise cost retries x timeout per call).

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

from medr2.llm.base import ContextWindowError, LLMError, Usage, json_only_instruction, record
from medr2.llm.cache import LLMCache, cached

RETRY_STATUS = {408, 409, 425, 429, 500, 502, 503, 504}


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
        self._schema_mode = "json_schema"  # downgraded to "prompt" when the server refuses it
        self._tokenize_ok: Optional[bool] = None
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
                if e.code in RETRY_STATUS:
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
        if json_schema is not None and self._schema_mode == "json_schema":
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "medr2", "schema": json_schema, "strict": True}}
        try:
            r = self._post("/chat/completions", body)
        except _HTTPStatus as e:
            about_schema = any(w in str(e).lower() for w in ("response_format", "json_schema", "schema", "grammar",
                                                              "guided"))
            if json_schema is None or e.code != 400 or "response_format" not in body or not about_schema:
                raise window_error(e) from None
            self._schema_mode = "prompt"  # the server does not take JSON schemas: state it in the prompt
            body.pop("response_format")
            body["messages"] = [*messages, {"role": "user", "content": json_only_instruction(json_schema)}]
            try:
                r = self._post("/chat/completions", body)
            except _HTTPStatus as e2:
                raise window_error(e2) from None
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
        t = time.perf_counter()
        body: dict[str, Any] = {"prompt": prompt + continuation, "max_tokens": 1, "temperature": 0.0,
                                "echo": True, "logprobs": 1}
        if self.model:
            body["model"] = self.model
        try:
            r = self._post("/completions", body)
        except _HTTPStatus as e:
            raise LLMError(f"{e}; this endpoint cannot score continuations (use vLLM, the llama.cpp server or a "
                           "local GGUF as scorer)") from None
        lps = continuation_from_echo(r, continuation)
        record(self.usage, len(lps), 0, time.perf_counter() - t)
        return lps

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
        raise LLMError("the endpoint returned no prompt log-probabilities (echo + logprobs); it cannot score "
                       "continuations") from None
    if not tokens or len(tokens) != len(values):
        raise LLMError("the endpoint's log-probabilities are malformed")
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
        raise LLMError("the endpoint's log-probabilities do not cover the continuation")
    return list(reversed(out))
