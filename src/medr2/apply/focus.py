"""Sentence-level evidence focus (issue 35 §2): from each passage that reaches the context, only
the sentences that bear on the question go into the prompt. A small generator reads less noise,
and the prompt is shorter. The citation still points at the whole passage (its number and
TextID are unchanged); the evidence table keeps the full text and shows what the model read.

Sentences are scored by the coarse reranker's cross-encoder when medr2's own one is loaded
(``question, sentence`` pairs), else by how many of the question's content words a sentence
holds. A passage keeps its ``keep`` best sentences, in their original order; gaps are marked
with an ellipsis. A passage with at most ``keep`` sentences is left whole.

Example::

    >>> from medr2.apply.focus import SentenceFocus
    >>> f = SentenceFocus(keep=1)                      # term overlap (no scorer given)
    >>> f.text("Which drug lowers urate in gout?",
    ...        "Gout is a common arthritis. Allopurinol lowers serum urate in gout. Diet matters too.")
    '... Allopurinol lowers serum urate in gout. ...'
"""

from __future__ import annotations

import re
from typing import Callable, Optional, Sequence

import numpy as np

from medr2.util.sentences import sentences

GAP = "..."
# Words too common to tell sentences apart (ours; English question words and glue).
_STOP = frozenset("""a an and are as at be been by can could did do does for from had has have how i if in
into is it its may might more most no not of on or should than that the their them then there these they this
those to was were what when where which who whom why will with would you your""".split())
_WORD = re.compile(r"[^\W_]+", re.UNICODE)

Scorer = Callable[[str, list[str]], Optional[np.ndarray]]  # None: the scorer cannot read the question


def content_words(text: str) -> set[str]:
    """Lower-cased words of three or more characters that are not stop words.

    >>> sorted(content_words("How fast does eGFR decline in CKD?"))
    ['ckd', 'decline', 'egfr', 'fast']
    """
    return {w for w in (m.group(0).lower() for m in _WORD.finditer(text)) if len(w) >= 3 and w not in _STOP}


def overlap_scores(question: str, sents: Sequence[str]) -> np.ndarray:
    """Share of the question's content words each sentence holds (a prefix match of 5 letters
    counts too: "declined" matches "decline").

    >>> overlap_scores("metformin dose in CKD", ["Reduce the metformin dose.", "Gout is common."]).tolist()
    [0.6666666666666666, 0.0]
    """
    q = content_words(question)
    if not q:
        return np.zeros(len(sents))
    out = []
    for s in sents:
        words = content_words(s)
        prefixes = {w[:5] for w in words if len(w) >= 5}
        out.append(sum(1 for w in q if w in words or (len(w) >= 5 and w[:5] in prefixes)) / len(q))
    return np.asarray(out, dtype=np.float64)


def join_kept(sents: Sequence[str], kept: Sequence[int]) -> str:
    """The kept sentences in order, with an ellipsis wherever sentences were left out.

    >>> join_kept(["A.", "B.", "C.", "D."], [0, 2])
    'A. ... C. ...'
    """
    kept = sorted(kept)
    parts: list[str] = []
    prev = -1
    for i in kept:
        if i != prev + 1:
            parts.append(GAP)
        parts.append(sents[i])
        prev = i
    if kept and kept[-1] != len(sents) - 1:
        parts.append(GAP)
    return " ".join(parts)


class SentenceFocus:
    """Keeps the ``keep`` best sentences of a passage for the prompt; ``scorer(question,
    sentences)`` gives one score per sentence (higher is better), term overlap when the scorer is
    None or returns None (a question it cannot read)."""

    def __init__(self, keep: int, scorer: Optional[Scorer] = None):
        if keep < 1:
            raise ValueError(f"apply.focus_sentences must be >= 1 to focus (0 turns it off), got {keep}")
        self.keep = keep
        self.scorer = scorer
        self.method = "relevance model" if scorer is not None else "term overlap"

    def choose(self, question: str, text: str) -> tuple[list[str], list[int]]:
        """The passage's sentences and the indices kept (all of them when it has few)."""
        sents = [s for _, _, s in sentences(text)]
        if len(sents) <= self.keep:
            return sents, list(range(len(sents)))
        scored = self.scorer(question, sents) if self.scorer is not None else None
        # a scorer gives None for a question it cannot read (medr2.search.rerank): term overlap then
        scores = np.asarray(scored if scored is not None else overlap_scores(question, sents), dtype=np.float64)
        order = sorted(range(len(sents)), key=lambda i: (-scores[i], i))
        return sents, sorted(order[: self.keep])

    def text(self, question: str, text: str) -> str:
        """What the prompt shows of the passage."""
        sents, kept = self.choose(question, text)
        return text if len(kept) == len(sents) else join_kept(sents, kept)

    def texts(self, question: str, passages: dict[str, str]) -> dict[str, tuple[str, int, int]]:
        """``{passage_id: (focused text, sentences kept, sentences)}`` for the passages it shortens."""
        out = {}
        for pid, text in passages.items():
            sents, kept = self.choose(question, text)
            if len(kept) < len(sents):
                out[pid] = (join_kept(sents, kept), len(kept), len(sents))
        return out
