"""Runaway repetition: a greedy small model that starts repeating itself never stops before its
token limit, and asking again with more room only buys a longer loop (bench/README.md, CPU
speed: two demo rationales looped to 350 tokens, were asked again with 700 and looped again).

:func:`looping` says whether a reply's tail is a loop: every stretch of its last ``tail``
characters (digits folded, so "[3]" and "[8]" read alike) already occurred at least ``times``
times earlier in the reply. A reply that copies its rationale into its answer repeats a stretch
once and is not a loop; ``"outcome, effect, impact"`` written for the fifth time is.

>>> looping("outcome, effect, impact, " * 20)
True
>>> looping('{"rationale": "ACE inhibitors lower blood pressure [1].", "answer": "ACE inhibitors lower blood pressure."}')
False

The constants were chosen on the replies in the demo's and the dev runs' answer caches (101
distinct replies): the five cut-off replies that loop score 1.0; the other cut-off replies (long,
not looping; at most 0.45) and every reply that ended by itself (at most 0.57) stay below 0.9.
"""

from __future__ import annotations

import re
from typing import Callable

TAIL_CHARS = 200   # the stretch of the reply that must be a repeat
SHINGLE_CHARS = 16  # the length of a "stretch"
TIMES = 2           # earlier occurrences each stretch needs
SHARE = 0.9         # share of the tail's stretches that must be repeats

_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")


def loop_share(text: str, tail: int = TAIL_CHARS, k: int = SHINGLE_CHARS, times: int = TIMES) -> float:
    """Share of the ``k``-character stretches in the last ``tail`` characters that occurred at
    least ``times`` times before their own position (case, whitespace and digits folded).

    >>> loop_share("short")
    0.0
    >>> round(loop_share("a b c d e f g h i j k l m n o p " * 30), 2)
    1.0
    """
    t = _DIGITS.sub("#", _SPACE.sub(" ", text.lower()))
    if len(t) < tail + k:
        return 0.0
    hits = n = 0
    for i in range(len(t) - tail, len(t) - k + 1):
        n += 1
        s, seen, j = t[i:i + k], 0, t.find(t[i:i + k])
        while 0 <= j < i and seen < times:
            seen += 1
            j = t.find(s, j + 1)
        hits += seen >= times
    return hits / n


def looping(text: str, share: float = SHARE) -> bool:
    """The reply's tail is a runaway loop (see the module docstring)."""
    return loop_share(text) >= share


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
MIN_SENTENCE = 20  # characters: a shorter "sentence" ("[1].", "Yes.") may repeat without a loop


def loop_start(text: str) -> int | None:
    """Where a looping reply starts repeating itself: the offset of its first sentence (of at
    least ``MIN_SENTENCE`` characters) that repeats an earlier one word for word (case and
    whitespace folded), None when no sentence repeats (a loop inside one long sentence or list).

    >>> t = "Metformin causes acidosis [1]. Insulin treats it [2]. Metformin causes acidosis [1]. Insulin"
    >>> t[:loop_start(t)]
    'Metformin causes acidosis [1]. Insulin treats it [2]. '
    >>> loop_start("Metformin lowers glucose [1]. It is first line [2].") is None
    True
    """
    seen: set[str] = set()
    pos = 0
    for part in _SENTENCE_END.split(text):
        at = text.find(part, pos)
        key = _SPACE.sub(" ", part.lower()).strip()
        if len(key) >= MIN_SENTENCE:
            if key in seen:
                return at
            seen.add(key)
        pos = at + len(part)
    return None


class RepetitionStop:
    """A llama-cpp-python logits processor that ends a greedy reply once it loops: every
    ``every`` tokens it detokenizes the reply so far and, when :func:`looping` holds, leaves only
    the end-of-generation token possible. ``hit`` records that it did. It changes no logit before
    that, so a reply that never loops is decoded exactly as without it.

    ``detokenize`` maps token ids to text; ``eos`` is the end-of-generation token id."""

    def __init__(self, detokenize: Callable[[list[int]], str], eos: int, every: int = 8):
        self.detokenize = detokenize
        self.eos = eos
        self.every = every
        self.start = -1
        self.hit = False

    def __call__(self, input_ids, scores):
        if self.start < 0:
            self.start = len(input_ids)  # the prompt: the first call sees no reply token yet
        made = len(input_ids) - self.start
        if not self.hit and made and made % self.every == 0:
            self.hit = looping(self.detokenize(list(input_ids[self.start:])))
        if self.hit:
            scores[:] = -float("inf")
            scores[self.eos] = 0.0
        return scores
