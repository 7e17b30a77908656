"""Loaders for known medical corpora; each keeps the source's own identifier in the doc id.

| format      | source                                   | doc id               | source type |
|-------------|------------------------------------------|----------------------|-------------|
| ngc         | NGC guideline summaries (JSONL)          | ``ngc:<ngc_id>``     | guideline   |
| openstax    | OpenStax textbook modules (JSONL)        | ``openstax:<module>``| book        |
| pubmedqa    | PubMedQA ``ori_pqal.json`` abstracts     | ``pmid:<PMID>``      | paper       |
| medquad     | MedQuAD answers (JSONL)                  | ``medquad:<qid>``    | entry       |
| medlineplus | MedlinePlus health topics (CSV)          | ``medlineplus:<id>`` | entry       |
| gbt16751    | GB/T 16751 TCM clinical terms (text)     | ``gbt16751:<part>:<code>`` | entry |
| tcmbench    | TCMBench solved items (JSON)             | ``tcmbench:<group>`` | entry       |

(the last two live in their own modules, :mod:`.gbt16751` and :mod:`.tcmbench`)

Example::

    >>> from medr2.ingest.loaders.corpora import ngc_record
    >>> d = ngc_record({"ngc_id": 7, "title": "G", "sections": [{"section": "Recommendations",
    ...     "fields": [{"name": "Major Recommendations", "field_id": "151", "text": "Do X."}]}]}, "f:1")
    >>> d.doc_id, [h for h, _ in d.walk()]
    ('ngc:7', [('Recommendations',), ('Recommendations', 'Major Recommendations')])
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Iterator

from medr2.config import Config
from medr2.ingest.loaders.base import LoadError, LoadItem, register
from medr2.ingest.loaders.records import iter_csv, iter_jsonl, load_json_value, map_records
from medr2.schema import Document, DocumentMeta, Section, SourceType
from medr2.util.text import detect_language

_YEAR = re.compile(r"\b(19[5-9]\d|20[0-4]\d)\b")


def ngc_record(rec: dict[str, Any], origin: str) -> Document:
    sections = []
    year = None
    for sec in rec["sections"]:
        children = []
        for f in sec.get("fields", []):
            text = (f.get("text") or "").strip()
            if f.get("name") == "Date Released" and year is None:
                m = _YEAR.search(text)
                year = int(m.group(1)) if m else None
            if text:
                children.append(Section(title=f["name"], text=text, labels=[str(f.get("field_id", ""))]))
        if children:
            sections.append(Section(title=sec["section"], children=children))
    if not sections:
        raise ValueError("no section text")
    return Document(
        doc_id=f"ngc:{rec['ngc_id']}", title=rec.get("title", ""), source_type=SourceType.guideline,
        sections=sections,
        meta=DocumentMeta(year=year, publication_types=["Practice Guideline"], origin=origin, language="en"),
    )


@register("ngc", streaming=True)
def load_ngc(path: Path, config: Config) -> Iterator[LoadItem]:
    """NGC guideline summaries: ``sections[].fields[]`` become the heading tree."""
    return map_records(iter_jsonl(path), ngc_record, "NGC summary")


def openstax_record(rec: dict[str, Any], origin: str) -> Document:
    title = rec["title"].strip()
    text = rec["text"].strip()
    if not text:
        raise ValueError("empty module text")
    body = Section(title=title, text=text)
    gloss = [f"{g['term']}: {g['meaning']}" for g in rec.get("glossary") or [] if g.get("term")]
    if gloss:
        body.children.append(Section(title="Glossary", text="\n".join(gloss)))
    node = body
    for heading in reversed([p.strip() for p in rec.get("path") or [] if p.strip()]):
        node = Section(title=heading, children=[node])
    book = (rec.get("book") or "").strip()
    top = Section(title=book, children=[node]) if book else node
    return Document(
        doc_id=f"openstax:{rec['module_id']}", title=title, source_type=SourceType.book, sections=[top],
        meta=DocumentMeta(origin=origin, language=detect_language(text), publication_types=["Textbook"],
                          extra={"book": book}),
    )


@register("openstax", streaming=True)
def load_openstax(path: Path, config: Config) -> Iterator[LoadItem]:
    """OpenStax textbook modules: book > unit > chapter (``path``) > module title."""
    return map_records(iter_jsonl(path), openstax_record, "OpenStax module")


def pubmedqa_record(pmid: str, rec: dict[str, Any], origin: str) -> Document:
    contexts = rec["CONTEXTS"]
    labels = rec.get("LABELS") or [""] * len(contexts)
    sections = [
        Section(title=(lab or "").title(), text=ctx.strip(), labels=[lab] if lab else [])
        for ctx, lab in zip(contexts, labels)
        if ctx.strip()
    ]
    if not sections:
        raise ValueError("no CONTEXTS")
    year = rec.get("YEAR")
    return Document(
        doc_id=f"pmid:{pmid}", title=f"PubMed {pmid}", source_type=SourceType.paper, sections=sections,
        meta=DocumentMeta(year=int(year) if year and str(year).isdigit() else None,
                          mesh_terms=list(rec.get("MESHES") or []), origin=origin, language="en"),
    )


@register("pubmedqa")
def load_pubmedqa(path: Path, config: Config) -> Iterator[LoadItem]:
    """PubMedQA ``ori_pqal.json``: each PMID's CONTEXTS with their LABELS, MESHES and YEAR."""
    value = load_json_value(path, config)
    if not isinstance(value, dict):
        raise LoadError("PubMedQA file must be an object keyed by PMID")
    items = ((f"{path}[{pmid}]", (str(pmid), rec)) for pmid, rec in value.items())
    yield from map_records(items, lambda pr, origin: pubmedqa_record(pr[0], pr[1], origin), "PubMedQA")


def medquad_record(rec: dict[str, Any], origin: str) -> Document | None:
    answer = (rec.get("answer") or "").strip()
    if not answer:
        return None  # MedQuAD lists many questions whose answers were removed upstream
    focus = (rec.get("focus") or "").strip()
    question = rec["question"].strip()
    return Document(
        doc_id=f"medquad:{rec['qid']}", title=question, source_type=SourceType.entry,
        sections=[Section(title=focus, children=[Section(title=question, text=answer, labels=[rec.get("qtype", "")])])]
        if focus else [Section(title=question, text=answer)],
        meta=DocumentMeta(origin=origin, url=rec.get("url") or "", language="en",
                          extra={k: rec[k] for k in ("qtype", "focus", "source", "semantic_group", "focus_cuis")
                                 if rec.get(k)}),
    )


@register("medquad", streaming=True)
def load_medquad(path: Path, config: Config) -> Iterator[LoadItem]:
    """MedQuAD JSONL: each answered question is an encyclopedia entry (focus > question)."""
    return map_records(iter_jsonl(path), medquad_record, "MedQuAD", needs='a non-empty "answer" field', source=path)


def medlineplus_row(row: dict[str, str], origin: str) -> Document:
    summary = (row.get("summary") or "").strip()
    if not summary:
        raise ValueError("empty summary")
    title = (row.get("title") or "").strip()
    also = (row.get("also_called") or "").strip()
    return Document(
        doc_id=f"medlineplus:{row['id']}", title=title, source_type=SourceType.entry,
        sections=[Section(title=title, text=summary)],
        meta=DocumentMeta(origin=origin, url=row.get("url") or "", language="en",
                          extra={"also_called": also} if also else {}),
    )


@register("medlineplus", streaming=True)
def load_medlineplus(path: Path, config: Config) -> Iterator[LoadItem]:
    """MedlinePlus health topics CSV (id, title, also_called, summary, url)."""
    return map_records(iter_csv(path), medlineplus_row, "MedlinePlus")


# --- format sniffing -------------------------------------------------------------------------

def sniff(path: Path) -> str | None:
    """Recognise a known corpus from its first record; None when nothing specific matches."""
    suffix = path.suffix.lower()
    try:
        with path.open("rb") as fh:
            head = fh.read(65536)
    except OSError:
        return None
    if suffix in (".jsonl", ".ndjson"):
        first = head.split(b"\n", 1)[0]
        if b'"ngc_id"' in first and b'"sections"' in first:
            return "ngc"
        if b'"module_id"' in first and b'"path"' in first:
            return "openstax"
        if b'"qtype"' in first and b'"qid"' in first:
            return "medquad"
    elif suffix == ".json":
        if b'"CONTEXTS"' in head[:20000] and head.lstrip().startswith(b"{"):
            return "pubmedqa"
        if b'"prefix_prompt"' in head and b'"example"' in head:
            return "tcmbench"
    elif suffix == ".txt":
        if "中医临床诊疗术语".encode() in head[:4096]:
            return "gbt16751"
    elif suffix == ".csv":
        first = head.split(b"\n", 1)[0].lower()
        if b"also_called" in first and b"summary" in first:
            return "medlineplus"
    return None
