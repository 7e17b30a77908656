"""Typed data model shared by every stage of medr2.

A :class:`Document` carries its heading tree (:class:`Section`) and metadata; ingestion cuts it
into :class:`Passage` objects whose ``passage_id`` (the TextID) is stable across re-ingestion;
search returns :class:`Hit` objects inside a :class:`SearchResult`.

Example::

    >>> from medr2.schema import Document, Section, SourceType
    >>> doc = Document(doc_id="md:x", title="T", source_type=SourceType.other,
    ...                sections=[Section(title="Intro", text="Hello.")])
    >>> Document.from_dict(doc.to_dict()) == doc
    True
"""

from __future__ import annotations

import hashlib
import unicodedata
from enum import Enum
from typing import Any, Iterator, Optional, Union

from pydantic import BaseModel, ConfigDict, Field


class SourceType(str, Enum):
    """Kind of source a document comes from (drives segmentation and evidence appraisal)."""

    paper = "paper"
    entry = "entry"
    book = "book"
    guideline = "guideline"
    other = "other"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_dict(cls, data: dict[str, Any]):
        return cls.model_validate(data)


class Section(_Model):
    """A node of a document's heading tree: a heading, its own text, and its sub-sections."""

    title: str = ""
    text: str = ""
    children: list["Section"] = Field(default_factory=list)
    # Free-form labels of the source (e.g. PubMed abstract label "RESULTS", NGC field id).
    labels: list[str] = Field(default_factory=list)

    def walk(self, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], "Section"]]:
        """Yield ``(heading_path, section)`` depth-first, the path including this section."""
        here = path + ((self.title,) if self.title else ())
        yield here, self
        for child in self.children:
            yield from child.walk(here)

    def outline(self) -> dict[str, Any]:
        """The heading tree without text (what the macro graph is built from)."""
        return {"title": self.title, "children": [c.outline() for c in self.children]}


class DocumentMeta(_Model):
    year: Optional[int] = None
    publication_types: list[str] = Field(default_factory=list)
    mesh_terms: list[str] = Field(default_factory=list)
    language: str = "en"
    origin: str = ""  # path (and record locator) the document was read from
    url: str = ""
    extra: dict[str, Any] = Field(default_factory=dict)


class Document(_Model):
    """A source document with its heading tree."""

    doc_id: str
    title: str = ""
    source_type: SourceType = SourceType.other
    sections: list[Section] = Field(default_factory=list)
    meta: DocumentMeta = Field(default_factory=DocumentMeta)

    def walk(self) -> Iterator[tuple[tuple[str, ...], Section]]:
        for s in self.sections:
            yield from s.walk(())

    def full_text(self) -> str:
        return "\n\n".join(s.text for _, s in self.walk() if s.text)

    def content_hash(self, with_origin: bool = False) -> str:
        """Hash of everything that determines the document's passages: not its origin (the file and
        record it was read from), so a record that moved in its file is not embedded again.
        ``with_origin``: the hash as indexes before 2026-12-06 stored it (origin included)."""
        dumped = self.model_dump_json() if with_origin else self.model_dump_json(exclude={"meta": {"origin"}})
        return hashlib.sha256(dumped.encode("utf-8")).hexdigest()


class Passage(_Model):
    """A retrieval unit cut from a document.

    ``passage_id`` is the TextID: a hash of the document id, heading path and normalised
    text (plus an ordinal when the same text repeats under the same heading), so ingesting
    the same text again yields the same id.
    """

    passage_id: str
    doc_id: str
    text: str
    heading_path: list[str] = Field(default_factory=list)
    start: int = 0  # character offsets into Document.full_text()
    end: int = 0
    language: str = "en"
    unit: int = 0  # index of the Med-R2 document unit (<= 10,000 tokens) it belongs to
    ordinal: int = 0  # position within the document

    def embedding_text(self, title: str = "") -> str:
        """Text given to the embedder: heading path prefix, then the passage."""
        return prefixed_text(title, self.heading_path, self.text)


def prefixed_text(title: str, heading_path: list[str], text: str) -> str:
    """The passage with its title and heading path as a ``>`` prefix (what the embedder and the
    reranker read).

    >>> prefixed_text("Gout (review)", ["Gout", "Treatment"], "Allopurinol.")
    'Gout (review) > Treatment\\nAllopurinol.'
    """
    path = [p for p in ([title] if title else []) + heading_path if p]
    # avoid repeating the title when it is also the first heading, even with a suffix ("X
    # (illustrative)" over "X"): a repeat costs the reranker tokens of its length limit
    dedup: list[str] = []
    for p in path:
        last = dedup[-1].casefold().strip() if dedup else None
        here = p.casefold().strip()
        if last is None or not (last.startswith(here) or here.startswith(last)):
            dedup.append(p)
    prefix = " > ".join(dedup)
    return f"{prefix}\n{text}" if prefix else text


def normalise_for_id(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).split())


def text_id(doc_id: str, heading_path: list[str], text: str, occurrence: int = 0) -> str:
    """Stable TextID of a passage (hex, 20 chars, prefixed ``p``)."""
    h = hashlib.sha256()
    h.update(doc_id.encode("utf-8"))
    h.update(b"\x1f")
    h.update("\x1e".join(heading_path).encode("utf-8"))
    h.update(b"\x1f")
    h.update(normalise_for_id(text).encode("utf-8"))
    if occurrence:
        h.update(f"\x1f{occurrence}".encode())
    return "p" + h.hexdigest()[:20]


class Hit(_Model):
    """One search result with every score that produced its rank."""

    passage_id: str
    doc_id: str
    title: str = ""
    source_type: SourceType = SourceType.other
    heading_path: list[str] = Field(default_factory=list)
    text: str = ""
    language: str = "en"
    year: Optional[int] = None
    publication_types: list[str] = Field(default_factory=list)
    score: float = 0.0
    # e.g. {"dense": 0.71, "dense_rank": 1, "sparse": 12.3, "sparse_rank": 4, "fused": ..., "rerank": ...}
    scores: dict[str, Optional[Union[int, float]]] = Field(default_factory=dict)

    def embedding_text(self) -> str:
        return prefixed_text(self.title, self.heading_path, self.text)


class SearchResult(_Model):
    query: str
    hits: list[Hit] = Field(default_factory=list)
    timings_ms: dict[str, float] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)  # e.g. why the hits carry no relevance score


class EvidenceRow(_Model):
    """One appraised passage: every factor of its fine score, and whether it reached the context."""

    passage_id: str
    doc_id: str
    title: str = ""
    source_type: SourceType = SourceType.other
    heading_path: list[str] = Field(default_factory=list)
    text: str = ""
    coarse_rank: int = 0
    coarse_score: Optional[float] = None
    # calibrated P(the passage bears on the query) from the coarse reranker; None without a relevance model
    relevance: Optional[float] = None
    level: int = 9
    design: str = "unknown"
    level_source: str = "default"
    doc_type: Optional[str] = None  # most probable of the 16 document types
    f_h: int = 1
    f_g: Optional[float] = None
    f_u: Optional[float] = None
    F: Optional[float] = None
    kept: bool = False
    reason: str = ""
    n: Optional[int] = None  # citation number in the context
    # what the prompt showed of the passage when sentence focus shortened it (apply.focus_sentences)
    focus: Optional[str] = None


class RoundRecord(_Model):
    """One round of Med-R2's Algorithm 2."""

    round: int
    query: str
    coarse_ids: list[str] = Field(default_factory=list)
    context_ids: list[str] = Field(default_factory=list)
    answer: str = ""
    insufficient: bool = False
    acc: Optional[float] = None
    mu: Optional[float] = None
    ratio: Optional[float] = None
    stop: bool = False
    stop_reason: str = ""


class Recommendation(_Model):
    """A guideline recommendation that applies to the question (medr2.apply.recommend): the
    statement as written, its grade as written and normalised strength, its direction, who it is
    for, and the passage (TextID and citation number) it comes from."""

    n: int  # citation number of its passage in the context
    passage_id: str  # TextID
    title: str = ""
    statement: str
    grade: Optional[str] = None  # as written ("Level A", "Strong recommendation, low-quality evidence")
    strength: Optional[str] = None  # strong, moderate, weak, consensus, insufficient; None: ungraded
    direction: str = "neutral"  # for, against, neutral
    population: Optional[str] = None
    section: Optional[str] = None  # the heading it sits under in its guideline ("Management of Severe CDI")
    # a list's lead-in whose items were read from the next passages of its document: their TextIDs
    continued_in: list[str] = Field(default_factory=list)
    relevance: Optional[float] = None
    covers: list[str] = Field(default_factory=list)  # parts of the question it covers


class AskResult(_Model):
    """What ``medr2 ask --json`` prints."""

    question: str
    options: dict[str, str] = Field(default_factory=dict)
    pipeline: str = "medr2"
    answer: str = ""
    rationale: str = ""
    citations: list[str] = Field(default_factory=list)
    insufficient: bool = False
    method: str = "llm"
    classification: dict[str, Any] = Field(default_factory=dict)
    reformulation: dict[str, Any] = Field(default_factory=dict)
    evidence: list[EvidenceRow] = Field(default_factory=list)
    conflicts: list[dict[str, Any]] = Field(default_factory=list)
    rounds: list[RoundRecord] = Field(default_factory=list)
    # graph mode (--kg): linked entities, the tiered statements shown (label T#), withheld ones, conflicts
    subgraph: dict[str, Any] = Field(default_factory=dict)
    # the evidence gate (medr2.apply.gate): whether the evidence was used for the answer and why;
    # None where no gate ran (direct answering, no evidence, gate.enabled = false)
    evidence_used: Optional[bool] = None
    gate: dict[str, Any] = Field(default_factory=dict)
    # guideline questions: the applicable recommendations (graded, cited, strongest first) and
    # the parts of the question that none of them covers (medr2.apply.recommend)
    recommendations: list[Recommendation] = Field(default_factory=list)
    uncovered: list[str] = Field(default_factory=list)
    usage: dict[str, Any] = Field(default_factory=dict)
    models: dict[str, Optional[str]] = Field(default_factory=dict)
    notes: list[str] = Field(default_factory=list)


class EvalQuestion(_Model):
    """One benchmark question, whatever its source format."""

    dataset: str
    id: str
    question: str
    options: dict[str, str] = Field(default_factory=dict)
    # option letter, or yes/no/maybe mapped to its letter; a multiple-answer question (CMExam) has
    # all its letters ("ABE") and only that exact set is right
    answer: str = ""
    context: Optional[str] = None  # PubMedQA abstract (never used to retrieve unless asked)
    pmid: Optional[str] = None


Section.model_rebuild()
