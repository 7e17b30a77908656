"""The LLM interface every backend implements, and helpers built only on it.

Example::

    >>> from medr2.llm.base import mean_nll
    >>> round(mean_nll([-0.5, -1.5]), 2)
    1.0
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Optional, Protocol


class LLMError(RuntimeError):
    """A model call that cannot be made; the message names the model and what to do."""


@dataclass
class Usage:
    """Per-stage accounting of model calls."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    by_stage: dict[str, dict[str, float]] = field(default_factory=dict)

    def add(self, stage: str, prompt_tokens: int, completion_tokens: int, seconds: float) -> None:
        self.calls += 1
        self.prompt_tokens += prompt_tokens
        self.completion_tokens += completion_tokens
        self.seconds += seconds
        s = self.by_stage.setdefault(stage, {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0, "seconds": 0.0})
        s["calls"] += 1
        s["prompt_tokens"] += prompt_tokens
        s["completion_tokens"] += completion_tokens
        s["seconds"] += seconds


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


def mean_nll(logprobs: list[float]) -> float:
    """Mean negative log-likelihood per token (the 'loss' of a continuation)."""
    if not logprobs:
        raise ValueError("no tokens to score")
    return -sum(logprobs) / len(logprobs)


def structured(llm: LLM, messages: list[dict[str, str]], schema: dict[str, Any], max_tokens: int = 512,
               retries: int = 2) -> dict[str, Any]:
    """Chat with JSON-schema constrained output, validated, with bounded repair attempts."""
    import jsonschema

    last_error = ""
    msgs = list(messages)
    for _ in range(retries + 1):
        out = llm.chat(msgs, max_tokens=max_tokens, json_schema=schema)
        try:
            value = json.loads(out["text"])
            jsonschema.validate(value, schema)
            return value
        except (json.JSONDecodeError, jsonschema.ValidationError) as e:
            last_error = str(e).split("\n")[0]
            msgs = messages + [{"role": "assistant", "content": out["text"]},
                               {"role": "user", "content": f"That was not valid ({last_error}). Reply with JSON "
                                                           "that matches the schema only."}]
    raise LLMError(f"{llm.name} gave no valid JSON for the schema after {retries + 1} tries: {last_error}")
