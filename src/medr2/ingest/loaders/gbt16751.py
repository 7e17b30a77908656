"""GB/T 16751-2021 (TCM clinical terms: diseases, syndromes, therapies) as a corpus: one
document per entry, titled with its Chinese term, whose text is the term, its English term, its
alternatives and its definition. These are the general TCM knowledge TCM-DiffRAG's cases link
into, and the definitions its prompt cites.

Example::

    >>> from medr2.terminology.sources import GbtTerm
    >>> from medr2.ingest.loaders.gbt16751 import term_document
    >>> d = term_document(GbtTerm("5.2", "Syndrome", "肝火证", "syndrome/pattern of liver fire", ["肝热证"],
    ...                           "泛指……的一类证候。"), "f")
    >>> d.doc_id, d.title, d.full_text()
    ('gbt16751:Syndrome:5.2', '肝火证', '肝火证（syndrome/pattern of liver fire；又称：肝热证）：泛指……的一类证候。')
    >>> [h for h, _ in d.walk()][-1]
    ('证候', '5.2 肝火证')
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from medr2.config import Config
from medr2.ingest.loaders.base import LoadError, LoadItem, register
from medr2.schema import Document, DocumentMeta, Section, SourceType
from medr2.terminology.sources import GbtTerm, gbt16751_records

PARTS = {"Disease": "疾病", "Syndrome": "证候", "Therapy": "治法"}


def term_document(t: GbtTerm, origin: str, ancestors: tuple[str, ...] = ()) -> Document:
    """The entry as a document whose heading path is the standard's part, the entry's broader
    terms (from its code: 5.2.1 is under 5.2) and the entry itself: the macro tree."""
    alt = f"；又称：{'、'.join(t.alternatives)}" if t.alternatives else ""
    text = f"{t.zh}（{t.en}{alt}）" + (f"：{t.definition}" if t.definition else "")
    section = Section(title=f"{t.code} {t.zh}", text=text)
    for title in reversed((PARTS[t.part_type], *ancestors)):
        section = Section(title=title, children=[section])
    return Document(doc_id=f"gbt16751:{t.part_type}:{t.code}", title=t.zh, source_type=SourceType.entry,
                    sections=[section],
                    meta=DocumentMeta(origin=origin, language="zh", extra={"part": t.part_type, "code": t.code}))


def is_gbt16751(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(4096).decode("utf-8", errors="ignore")
    except OSError:
        return False
    return "中医临床诊疗术语" in head


@register("gbt16751", (), streaming=True)
def load_gbt16751(path: Path, config: Config) -> Iterator[LoadItem]:
    """GB/T 16751-2021 TCM clinical terms (text): one document per entry."""
    n = 0
    names: dict[tuple[str, str], str] = {}  # (part, code) -> Chinese term
    for t in gbt16751_records(str(path), "the ingested file"):
        n += 1
        names[(t.part_type, t.code)] = t.zh
        parts = t.code.split(".")
        ancestors = tuple(f"{c} {names[(t.part_type, c)]}" for c in (".".join(parts[:i]) for i in range(1, len(parts)))
                          if (t.part_type, c) in names)
        yield term_document(t, f"{path}:{t.part_type}:{t.code}", ancestors)
    if not n:
        raise LoadError(f"{path}: no GB/T 16751 entry found (a code line, then 'Chinese term  English term')")
