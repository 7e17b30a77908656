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

from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Protocol

from medr2.schema import Document, Passage
from medr2.util.sentences import sentences  # noqa: F401  (re-exported: the extractors split with it)


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


