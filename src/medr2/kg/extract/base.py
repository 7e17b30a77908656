"""What every extractor returns: a candidate triple with its surfaces and source TextID.

Example::

    >>> from medr2.kg.extract.base import Candidate, sentences
    >>> c = Candidate("metformin", "treats", "type 2 diabetes", "p1", "d1", "rules")
    >>> Candidate.from_dict(c.to_dict()) == c
    True
    >>> [s for _, _, s in sentences("One is here. Two is there.\\n三是这里。")]
    ['One is here.', 'Two is there.', '三是这里。']
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Optional, Protocol

from medr2.schema import Document, Passage


@dataclass
class Candidate:
    head: str
    relation: str
    tail: str
    text_id: str
    doc_id: str
    extractor: str
    head_type: Optional[str] = None  # type the extractor knows (dictionary hit, field role, LLM)
    tail_type: Optional[str] = None
    head_id: Optional[str] = None  # entity id when the extractor matched a dictionary entry
    tail_id: Optional[str] = None
    head_level: Optional[str] = None
    tail_level: Optional[str] = None
    attrs: dict[str, Any] = field(default_factory=dict)  # sentence, strength, evidence class, ...

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Candidate":
        return cls(**d)


class Extractor(Protocol):
    name: str

    def applies(self, doc: Document) -> bool: ...
    def extract(self, doc: Document, passages: list[Passage]) -> list[Candidate]: ...


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
