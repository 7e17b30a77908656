"""A batch of documents on its way into the index: what ingestion hands to
:meth:`medr2.index.index.Index.commit`, and what its encoders make of the passages (computed by
the index or by ingestion workers, :mod:`medr2.ingest.parallel`).

Example::

    >>> from medr2.index.batch import PendingDoc, batch_texts
    >>> from medr2.schema import Document, Passage
    >>> d = Document(doc_id="d1", title="Metformin")
    >>> p = Passage(passage_id="p1", doc_id="d1", text="First-line therapy.", heading_path=["Use"])
    >>> texts, languages = batch_texts([PendingDoc(d, [p], "h1", replaces=False)])
    >>> len(texts), texts[0].endswith("First-line therapy.")
    (1, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from medr2.schema import Document, Passage


@dataclass
class PendingDoc:
    doc: Document
    passages: list[Passage]
    content_hash: str
    replaces: bool  # an older version of the same doc id is stored


@dataclass
class Encoded:
    """What a batch of passages becomes before it is written: dense vectors, BM25 terms and
    SPLADE vectors, in the order of ``batch_texts`` (computed here or by ingestion workers)."""
    vectors: np.ndarray
    tokens: list[list[str]]
    splade: Optional[object] = None


def batch_texts(docs: list[PendingDoc]) -> tuple[list[str], list[str]]:
    """The texts the encoders read (title and heading path before each passage) and languages."""
    pairs = [(p.embedding_text(d.doc.title), p.language) for d in docs for p in d.passages]
    return [t for t, _ in pairs], [lang for _, lang in pairs]
