"""Sentence splitting shared by the knowledge-graph extractors, the trust metrics and the
evidence focus: line breaks and sentence ends, Latin and CJK punctuation, with common
abbreviations, genus initials and decimals kept inside their sentence.

Example::

    >>> from medr2.util.sentences import sentences
    >>> [s for _, _, s in sentences("One is here. Two is there.\\n三是这里。")]
    ['One is here.', 'Two is there.', '三是这里。']
"""

from __future__ import annotations

import re
from typing import Iterator

_SENT = re.compile(r"[^\n.!?。！？；]+(?:[.!?。！？；]+|$)")
_ABBREV_END = re.compile(r"\b(?:e\.g|i\.e|vs|Dr|Fig|et al|approx|No|St)\.$")
_INITIAL_END = re.compile(r"(?:^|[\s(])[A-Z]\.$")  # "T. gondii", "C. difficile"


def _no_end(piece: str, nxt: str, so_far: str) -> bool:
    """A period that does not end a sentence: inside a word or number ("e.g", "2.5", "U.S."), after
    a listed abbreviation, or after a genus initial followed by a lowercase word."""
    if not piece.endswith(".") or nxt[:1] == "\n":
        return False
    return (nxt[:1].isalnum() or bool(_ABBREV_END.search(so_far))
            or (bool(_INITIAL_END.search(so_far)) and nxt[:1] == " " and nxt[1:2].islower()))


def sentences(text: str) -> Iterator[tuple[int, int, str]]:
    """(start, end, sentence) pieces split at line breaks and sentence ends (a few common
    abbreviations, genus initials and decimals do not end a sentence).

    Example::

        >>> [s for _, _, s in sentences("Avoid T. gondii (e.g. cat litter). Take 2.5 mg.")]
        ['Avoid T. gondii (e.g. cat litter).', 'Take 2.5 mg.']
    """
    start = None
    for m in _SENT.finditer(text):
        s, e = m.start(), m.end()
        piece = text[s:e]
        if start is None:
            start = s
        if _no_end(piece, text[e:e + 2], text[start:e]):
            continue
        chunk = text[start:e]
        lead = len(chunk) - len(chunk.lstrip())
        if chunk.strip():
            yield start + lead, start + len(chunk.rstrip()), chunk.strip()
        start = None
    if start is not None and text[start:].strip():
        chunk = text[start:]
        lead = len(chunk) - len(chunk.lstrip())
        yield start + lead, start + len(chunk.rstrip()), chunk.strip()
