"""The LLM interface every backend implements, and helpers built only on it.

Example::

    >>> from medr2.llm.base import mean_nll
    >>> round(mean_nll([-0.5, -1.5]), 2)
    1.0
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional, Protocol

from medr2.llm.repetition import looping


class LLMError(RuntimeError):
    """A model call that cannot be made; the message names the model and what to do."""


class ContextWindowError(LLMError):
    """The prompt alone does not fit the model's context window."""


class NoLogprobsError(LLMError):
    """The model answers, but gives no usable token log-probabilities, so it cannot score a
    continuation (some remote servers): what reads P("yes") can fall back, where a down server cannot."""


class LLMOutputError(LLMError):
    """The model answered, but never in the form asked for (e.g. no valid JSON after the repair
    attempts): a property of the model and prompt, so asking again the same way gives the same.
    ``reply`` is the last reply; ``looped`` says that it was ended as a runaway loop."""

    def __init__(self, message: str, reply: str = "", looped: bool = False):
        super().__init__(message)
        self.reply = reply
        self.looped = looped


@dataclass
class Usage:
    """Per-stage accounting of model calls."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # prompt tokens whose KV state was reused from an earlier call (not prefilled again)
    reused_tokens: int = 0
    seconds: float = 0.0
    by_stage: dict[str, dict[str, float]] = field(default_factory=dict)

    def _stage(self, stage: str) -> dict[str, float]:
        return self.by_stage.setdefault(stage, {"calls": 0, "cached_calls": 0, "prompt_tokens": 0, "reused_tokens": 0,
                                                "completion_tokens": 0, "llm_seconds": 0.0, "seconds": 0.0})

    def add(self, stage: str, prompt_tokens: int, completion_tokens: int, seconds: float, reused: int = 0) -> None:
        """One model call that really ran; ``reused`` of its prompt tokens came from a kept KV state."""
        self.calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.reused_tokens += reused
        self.seconds += seconds
        s = self._stage(stage)
        s["calls"] += 1
        s["prompt_tokens"] += prompt_tokens
        s["reused_tokens"] += reused
        s["completion_tokens"] += completion_tokens
        s["llm_seconds"] += seconds

    def add_cached(self, stage: str) -> None:
        """A call answered from the persistent cache (no tokens, no model time)."""
        self._stage(stage)["cached_calls"] += 1

    def add_wall(self, stage: str, seconds: float) -> None:
        """Wall-clock time of a whole pipeline stage, model calls included."""
        self._stage(stage)["seconds"] += seconds

    def to_dict(self) -> dict[str, Any]:
        total = sum(s["seconds"] for s in self.by_stage.values())
        llm = sum(s["llm_seconds"] for s in self.by_stage.values())
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens, "reused_tokens": self.reused_tokens,
                "completion_tokens": self.completion_tokens,
                "llm_seconds": round(self.seconds, 3), "seconds": round(total, 3),
                "outside_llm_share": round(min(max((total - llm) / total, 0.0), 1.0), 4) if total > 0 else None,
                "stages": {k: {kk: (round(vv, 3) if isinstance(vv, float) else vv) for kk, vv in v.items()}
                           for k, v in self.by_stage.items()}}


# The pipeline stage a model call belongs to, and the run's accounting (if a run is active).
_STAGE: contextvars.ContextVar[str] = contextvars.ContextVar("medr2_stage", default="other")
_RUN_USAGE: contextvars.ContextVar[Optional[Usage]] = contextvars.ContextVar("medr2_run_usage", default=None)
# Someone following the run's progress (the streaming API): called with each stage name as it starts.
_LISTENER: contextvars.ContextVar[Optional[Callable[[str], None]]] = contextvars.ContextVar("medr2_stage_listener",
                                                                                          default=None)


@contextlib.contextmanager
def listen(callback: Callable[[str], None]) -> Iterator[None]:
    """Call ``callback(stage_name)`` whenever a stage starts inside the block."""
    token = _LISTENER.set(callback)
    try:
        yield
    finally:
        _LISTENER.reset(token)


@contextlib.contextmanager
def stage(name: str) -> Iterator[None]:
    """Attribute model calls (and, for an active run, wall time) to a named pipeline stage."""
    token = _STAGE.set(name)
    cb = _LISTENER.get()
    if cb is not None:
        cb(name)
    t = time.perf_counter()
    try:
        yield
    finally:
        _STAGE.reset(token)
        run = _RUN_USAGE.get()
        if run is not None:
            run.add_wall(name, time.perf_counter() - t)


@contextlib.contextmanager
def track(usage: Usage) -> Iterator[Usage]:
    """Collect every model call made inside the block into ``usage``."""
    token = _RUN_USAGE.set(usage)
    try:
        yield usage
    finally:
        _RUN_USAGE.reset(token)


def current_stage() -> str:
    return _STAGE.get()


def record(own: Optional[Usage], prompt_tokens: int, completion_tokens: int, seconds: float,
           cached: bool = False, reused: int = 0) -> None:
    """Account one call on the backend's own usage and on the active run's."""
    st = current_stage()
    for u in (own, _RUN_USAGE.get()):
        if u is None:
            continue
        if cached:
            u.add_cached(st)
        else:
            u.add(st, prompt_tokens, completion_tokens, seconds, reused)


class LLM(Protocol):
    name: str

    def chat(self, messages: list[dict[str, str]], max_tokens: int = 512, temperature: float = 0.0,
             seed: int = 0, json_schema: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        """Returns {"text", "prompt_tokens", "completion_tokens"}."""
        ...

    def continuation_logprobs(self, prompt: str, continuation: str) -> list[float]:
        """Log-probability of each token of ``continuation`` after ``prompt``."""
        ...

    def count_tokens(self, text: str) -> int: ...


def json_only_instruction(schema: dict[str, Any]) -> str:
    """Plain-text statement of the schema, for backends that cannot constrain decoding."""
    return ("Reply with one JSON object only, no prose, matching this JSON schema:\n"
            + json.dumps(schema, ensure_ascii=False))


def extract_json(text: str) -> str:
    """The first balanced JSON object in ``text`` (models without grammar wrap it in prose or fences)."""
    start = text.find("{")
    if start < 0:
        return text
    depth, in_str, esc = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start:i + 1]
    return text[start:]


def mean_nll(logprobs: list[float]) -> float:
    """Mean negative log-likelihood per token (the 'loss' of a continuation)."""
    if not logprobs:
        raise ValueError("no tokens to score")
    return -sum(logprobs) / len(logprobs)


def structured(llm: LLM, messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int = 512,
               retries: int = 2, grow: bool = True) -> dict[str, Any]:
    """Chat with JSON-schema constrained output, validated, with bounded repair attempts.

    A reply that is invalid JSON because it was cut off (at ``max_tokens``, or where the context
    window ended) is not "repaired" (the repair turn would be cut off the same way, and a
    deterministic model repeats itself): the question is asked once more with twice the room, or
    the room the window leaves, and a reply cut off again ends the attempts. So a cut-off reply
    costs at most the tokens of the repair turns it replaces. A repair turn (the invalid reply
    and a correction) that would not fit the window ends the attempts too: the model answered,
    just not validly, so the error is an :class:`LLMOutputError` that callers answer around. A
    reply that loops (the backend ended it for repetition, or it was cut off repeating itself,
    :func:`medr2.llm.repetition.looping`) ends the attempts at once: greedy decoding would loop
    again. ``grow=False``: a cut-off reply ends the attempts at once (the caller has a cheaper
    answer to a reply that does not fit, :class:`medr2.formulate.reformulate.LLMReformulator`)."""
    import jsonschema

    last_error = ""
    msgs = list(messages)
    budget = max_tokens
    tries = 0
    repairing = looped = False
    reply = ""
    while tries <= retries:
        tries += 1
        try:
            out = llm.chat(msgs, max_tokens=budget, temperature=getattr(llm, "temperature", 0.0),
                           seed=getattr(llm, "seed", 0), json_schema=schema)
        except ContextWindowError as e:
            if not repairing:
                raise
            last_error += f"; the repair turn does not fit the context window ({e})"
            break
        reply = out["text"]
        try:
            # strict=False: a raw newline or tab inside a string (small models write them) is read as such
            value = json.loads(extract_json(out["text"]), strict=False)
            jsonschema.validate(value, schema)
            return value
        except (json.JSONDecodeError, jsonschema.ValidationError) as e:
            last_error = str(e).split("\n")[0]
            cut = cut_off(out, budget)
            if out.get("finish_reason") == "repetition" or (cut and looping(out["text"])):
                # a greedy model that loops loops again, with more room or after a repair turn
                last_error = f"the reply looped after {int(out.get('completion_tokens') or 0)} tokens ({last_error})"
                looped = True
                break
            if cut:
                last_error = f"the reply was cut off at {int(out.get('completion_tokens') or budget)} tokens " \
                             f"({last_error})"
                more = 2 * max_tokens
                room = window_room(llm, out)
                if room is not None:
                    more = min(more, room)
                if not grow or budget > max_tokens or more <= budget:
                    break
                budget, msgs, repairing = more, list(messages), False
                continue
            msgs = messages + [{"role": "assistant", "content": out["text"]},
                               {"role": "user", "content": f"That was not valid ({last_error}). Reply with JSON "
                                                           "that matches the schema only."}]
            repairing = True
    raise LLMOutputError(f"{llm.name} gave no valid JSON for the schema after {tries} tries: {last_error}",
                         reply, looped)


def cut_off(out: dict[str, Any], budget: int) -> bool:
    """The reply stopped for length: the backend says so, or it used the whole budget.

    >>> cut_off({"completion_tokens": 629, "finish_reason": "length"}, 800), cut_off({"completion_tokens": 40}, 400)
    (True, False)
    """
    return out.get("finish_reason") == "length" or int(out.get("completion_tokens") or 0) >= budget


def window_room(llm: Any, out: dict[str, Any]) -> Optional[int]:
    """Tokens the context window leaves after the prompt of ``out``, when the model's window
    (``n_ctx``) and the prompt's size are known; None otherwise."""
    n_ctx, prompt = getattr(llm, "n_ctx", None), int(out.get("prompt_tokens") or 0)
    return max(int(n_ctx) - prompt, 0) if isinstance(n_ctx, int) and n_ctx > 0 and prompt else None
