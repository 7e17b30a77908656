"""Greedy grammar decoding that checks the model's own choice first.

llama-cpp-python applies a JSON-schema grammar to every token of the vocabulary at every step
(151,936 tokens for the bundled Qwen): about 27 ms a token on 2 cores, on top of a 66-74 ms
decode step (bench/README.md, CPU speed). With greedy decoding only one question matters: is
the highest-scoring token one the grammar allows? If it is, it is also the highest-scoring
allowed token, so the grammar-masked argmax is the same token. Only when it is not are the next
candidates checked, best first, and the whole vocabulary only if none of the best 64 is allowed.
The reply is the one llama.cpp's grammar sampler gives, token for token (ties go to the lower
token id in both); ``tests/llm/test_grammar_first.py`` checks it against llama.cpp's own.

:class:`GrammarFirst` is a llama-cpp-python logits processor holding its own llama.cpp grammar
sampler; it advances that grammar with each token the reply takes (read from the evaluated
tokens at the next step) and, when the best token is refused, leaves only the chosen one
possible. Use it with ``temperature = 0`` and no other logits processor that changes the order.

Example::

    >>> from medr2.llm.grammar_first import GrammarFirst                  # doctest: +SKIP
    >>> g = GrammarFirst(llm, schema)                                      # doctest: +SKIP
    >>> llm.create_chat_completion(messages, temperature=0,
    ...     logits_processor=llama_cpp.LogitsProcessorList([g]))           # doctest: +SKIP
    >>> g.close()                                                          # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
from typing import Any, Callable, Optional

import numpy as np

FIRST_CANDIDATES = 64  # refused best token: check this many next-best one by one before the whole vocabulary

_TOKEN_DATA = np.dtype([("id", np.intc), ("logit", np.single), ("p", np.single)], align=True)


def first_allowed(scores: np.ndarray, allows: Callable[[int, float], bool], k: int = FIRST_CANDIDATES) -> Optional[int]:
    """The highest-scoring of the best ``k`` tokens that ``allows(token, logit)`` accepts (the lower
    id among equal scores), None when it accepts none of them.

    >>> scores = np.array([0.1, 2.0, 1.5, 2.0])
    >>> first_allowed(scores, lambda t, logit: True), first_allowed(scores, lambda t, logit: t not in (1, 3))
    (1, 2)
    >>> first_allowed(scores, lambda t, logit: t == 0, k=3) is None
    True
    """
    for t in np.argsort(-scores, kind="stable")[:k]:
        if allows(int(t), float(scores[t])):
            return int(t)
    return None


class GrammarFirst:
    """A greedy grammar constraint for ``llm`` (a ``llama_cpp.Llama``) from a JSON schema, built
    the way llama-cpp-python builds it for ``response_format`` (a schema it cannot convert falls
    back to any JSON, as there). ``refused`` counts the steps whose best token the grammar
    refused; ``steps`` all steps. ``failed`` is set when the grammar allowed no token at all."""

    def __init__(self, llm: Any, schema: dict[str, Any]):
        import llama_cpp
        from llama_cpp.llama_chat_format import _grammar_for_response_format

        self._lc = llama_cpp
        g = _grammar_for_response_format({"type": "json_object", "schema": schema})
        self._smpl = llama_cpp.llama_sampler_init_grammar(llm._model.vocab, g._grammar.encode("utf-8"),
                                                           g._root.encode("utf-8"))
        self._one = (llama_cpp.llama_token_data * 1)()
        self._arr = llama_cpp.llama_token_data_array(data=self._one, size=1, selected=-1, sorted=False)
        self._eos = llm.token_eos()
        self._seen = -1  # evaluated tokens already given to the grammar (-1: the prompt, unknown yet)
        self.steps = self.refused = 0
        self.failed = False

    def _allows(self, token: int, logit: float) -> bool:
        self._one[0].id, self._one[0].logit, self._one[0].p = token, logit, 0.0
        self._arr.size, self._arr.selected, self._arr.sorted = 1, -1, False
        self._lc.llama_sampler_apply(self._smpl, ctypes.byref(self._arr))
        return self._one[0].logit != -np.inf

    def _best_allowed(self, scores: np.ndarray) -> int:
        """The highest-scoring token the grammar allows (lowest id among equals), or -1."""
        t = first_allowed(scores, self._allows)
        if t is not None:
            return t
        data = np.zeros(len(scores), dtype=_TOKEN_DATA)
        data["id"] = np.arange(len(scores))
        data["logit"] = scores
        arr = self._lc.llama_token_data_array(
            data=data.ctypes.data_as(ctypes.POINTER(self._lc.llama_token_data)), size=len(scores),
            selected=-1, sorted=False)
        self._lc.llama_sampler_apply(self._smpl, ctypes.byref(arr))
        masked = data["logit"]
        return int(np.argmax(masked)) if np.isfinite(masked).any() else -1

    def __call__(self, input_ids, scores):
        if self.failed:
            return self._end(scores)
        if self._seen < 0:
            self._seen = len(input_ids)
        for t in input_ids[self._seen:]:  # the token the previous step chose
            self._lc.llama_sampler_accept(self._smpl, int(t))
        self._seen = len(input_ids)
        self.steps += 1
        best = int(np.argmax(scores))
        if self._allows(best, float(scores[best])):
            return scores
        self.refused += 1
        t = self._best_allowed(scores)
        if t < 0:
            # the caller raises; an exception here would be lost inside llama.cpp, and accepting a
            # refused token would abort it: end the reply instead
            self.failed = True
            return self._end(scores)
        out = np.full_like(scores, -np.inf)
        out[t] = scores[t]
        return out

    def _end(self, scores):
        scores[:] = -np.inf
        scores[self._eos] = 0.0
        return scores

    def close(self) -> None:
        if self._smpl is not None:
            self._lc.llama_sampler_free(self._smpl)
            self._smpl = None

    def __del__(self):
        self.close()
