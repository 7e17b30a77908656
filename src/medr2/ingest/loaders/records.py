"""Record loaders: JSON Lines, JSON and CSV with a field mapping.

The mapping names which record field fills which document field (dotted paths reach into
nested objects)::

    medr2 ingest abstracts.jsonl --index idx --map id=pmid --map text=abstract --map year=pub.year

Without a mapping, common names are tried (``id``/``doc_id``/``_id``, ``title``,
``text``/``contents``/``content``/``abstract``/``body``), which reads MedRAG-style corpora
as they are. A line holding a one-element JSON list of a string is read as that text.

Example::

    >>> from medr2.ingest.loaders.records import record_to_document
    >>> from pathlib import Path
    >>> d = record_to_document({"pmid": "1", "abstract": "Text."}, {"id": "pmid", "text": "abstract"},
    ...                        Path("x.jsonl"), "x.jsonl:1", "paper")
    >>> d.doc_id, d.source_type.value
    ('jsonl:1', 'paper')
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional

from medr2.config import Config
from medr2.ingest.loaders.base import LoadError, LoadItem, Notice, Problem, register
from medr2.schema import Document, DocumentMeta, Section, SourceType
from medr2.util.text import detect_language

DEFAULT_FIELDS = {
    "id": ("id", "doc_id", "_id", "docid", "pmid", "PMID"),
    "title": ("title", "Title"),
    "text": ("text", "contents", "content", "abstract", "body", "summary", "answer"),
}
MAPPABLE = ("id", "title", "text", "year", "source_type", "language", "url", "mesh_terms",
            "publication_types", "heading")


def _get(record: Any, dotted: str) -> Any:
    cur = record
    for part in dotted.split("."):
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return None
    return cur


def check_mapping(mapping: dict[str, str]) -> None:
    bad = [k for k in mapping if k not in MAPPABLE]
    if bad:
        raise LoadError(f"unknown mapping target(s) {bad}; map any of {list(MAPPABLE)} to a record field")


def record_to_document(
    record: Any, mapping: dict[str, str], path: Path, origin: str, source_type: Optional[str],
    prefix: str = "jsonl",
) -> Document:
    if isinstance(record, list) and len(record) == 1 and isinstance(record[0], str):
        record = record[0]
    if isinstance(record, str):  # a bare text record: the mapping does not apply
        record, mapping = {"text": record}, {}
    if not isinstance(record, dict):
        raise ValueError(f"record is a {type(record).__name__}, expected an object")

    def field(name: str) -> Any:
        if name in mapping:
            return _get(record, mapping[name])
        for cand in DEFAULT_FIELDS.get(name, (name,)):
            if cand in record and record[cand] not in (None, ""):
                return record[cand]
        return None

    text = field("text")
    if isinstance(text, list):
        text = "\n\n".join(str(t) for t in text)
    if not isinstance(text, str) or not text.strip():
        want = mapping.get("text", "/".join(DEFAULT_FIELDS["text"]))
        raise ValueError(f"no text (looked for field {want!r}; set --map text=FIELD)")
    raw_id = field("id")
    doc_id = f"{prefix}:{raw_id}" if raw_id not in (None, "") else (
        f"{prefix}:{path.stem}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:12]}"
    )
    title = str(field("title") or "")
    if not title:
        first = text.strip().split("\n", 1)[0]
        title = first[:120]
    st = field("source_type") or source_type or "other"
    try:
        stype = SourceType(str(st))
    except ValueError:
        raise ValueError(f"source_type {st!r} is not one of {[s.value for s in SourceType]}") from None
    year = field("year")
    try:
        year = int(str(year)[:4]) if year not in (None, "") else None
    except ValueError:
        year = None
    lang = field("language") or detect_language(text)
    mesh = field("mesh_terms") or []
    pubt = field("publication_types") or []
    heading = field("heading")
    sec = Section(title=str(heading) if heading else "", text=text.strip())
    meta = DocumentMeta(
        year=year, language=str(lang), url=str(field("url") or ""), origin=origin,
        mesh_terms=[str(m) for m in (mesh if isinstance(mesh, list) else [mesh])],
        publication_types=[str(p) for p in (pubt if isinstance(pubt, list) else [pubt])],
    )
    return Document(doc_id=doc_id, title=title, source_type=stype, sections=[sec], meta=meta)


def strict_jsonl(path: str | Path, error: type[Exception]) -> Iterator[tuple[str, Any]]:
    """``("PATH:LINE", value)`` for each JSON line; the first bad line (or an empty file) raises
    ``error`` naming it. For inputs that must be whole, such as labelled data."""
    p = Path(path)
    try:
        for item in iter_jsonl(p):
            if isinstance(item, Problem):
                raise error(f"{item.path}: {item.reason}")
            yield item
    except (LoadError, OSError) as e:
        raise error(f"{p}: {e}") from None


def iter_jsonl(path: Path) -> Iterator[tuple[str, Any] | Problem]:
    """Yield ``("PATH:LINE", value)`` for each JSON line, a Problem for each bad one."""
    if path.stat().st_size == 0:
        raise LoadError("empty file")
    seen = False
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                line = raw.decode("utf-8-sig" if n == 1 else "utf-8")
            except UnicodeDecodeError as e:
                yield Problem(f"{path}:{n}", f"line is not valid UTF-8 (byte {e.start}); re-encode as UTF-8")
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as e:
                yield Problem(f"{path}:{n}", f"invalid JSON ({e.msg} at column {e.colno})")
                continue
            seen = True
            yield f"{path}:{n}", value
    if not seen:
        raise LoadError("no valid JSON line in the file")


def map_records(items: Iterable[tuple[str, Any] | Problem], build: Callable[[Any, str], Optional[Document]],
                what: str = "", needs: str = "", source: Optional[Path] = None) -> Iterator[LoadItem]:
    """Build a document from each ``(origin, record)``; Problems pass through, a record that
    cannot be built becomes a Problem naming its origin, ``None`` (nothing to index) is skipped.

    ``needs`` says what a record skipped with ``None`` lacks (e.g. ``a non-empty "answer"
    field``): when no record of the file ``source`` gave a document and some were skipped so, a
    :class:`Notice` names the file and why nothing came of it."""
    records = skipped = built = 0
    for item in items:
        if isinstance(item, Problem):
            yield item
            continue
        origin, record = item
        records += 1
        try:
            doc = build(record, origin)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            reason = str(e) if isinstance(e, ValueError) and not what else f"{type(e).__name__}: {e}"
            yield Problem(origin, f"not a {what} record ({reason})" if what else reason)
            continue
        if doc is None:
            skipped += 1
        else:
            built += 1
            yield doc
    if skipped and not built and needs and source is not None:
        yield Notice(str(source), f"{records - skipped} of {records} {what + ' ' if what else ''}records have "
                                  f"{needs}; nothing was ingested from {source}")


def _mapping(config: Config) -> dict[str, str]:
    m = dict(config.ingest.json_fields)
    check_mapping(m)
    return m


@register("jsonl", (".jsonl", ".ndjson"), streaming=True)
def load_jsonl(path: Path, config: Config) -> Iterator[LoadItem]:
    """JSON Lines, one document per line, fields by mapping (``--map text=FIELD``)."""
    m, st = _mapping(config), config.ingest.source_type
    return map_records(iter_jsonl(path), lambda rec, origin: record_to_document(rec, m, path, origin, st))


def load_json_value(path: Path, config: Config) -> Any:
    from medr2.ingest.loaders.base import read_text_file

    text = read_text_file(path, config)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise LoadError(f"invalid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None


@register("json", (".json",))
def load_json(path: Path, config: Config) -> Iterator[LoadItem]:
    """JSON: a list of records (or strings), or an object whose values are records keyed by id."""
    value = load_json_value(path, config)
    m = _mapping(config)
    source_type = config.ingest.source_type
    if isinstance(value, dict):
        items = []
        for k, v in value.items():
            if isinstance(v, dict) and "id" not in m and not any(f in v for f in DEFAULT_FIELDS["id"]):
                v = {**v, "id": k}
            items.append((f"{path}[{k}]", v))
    elif isinstance(value, list):
        items = [(f"{path}[{i}]", v) for i, v in enumerate(value)]
    else:
        raise LoadError("JSON must be a list of records or an object of records")
    return map_records(items, lambda rec, origin: record_to_document(rec, m, path, origin, source_type, "json"))


def iter_csv(path: Path) -> Iterator[tuple[str, dict[str, str]] | Problem]:
    """Yield ``("PATH:LINE", row)`` for each CSV row."""
    if path.stat().st_size == 0:
        raise LoadError("empty file")
    csv.field_size_limit(50_000_000)
    with path.open("rb") as raw:
        stream = io.TextIOWrapper(raw, encoding="utf-8-sig", errors="strict", newline="")
        try:
            reader = csv.DictReader(stream)
            for n, row in enumerate(reader, 2):
                yield f"{path}:{n}", row
        except UnicodeDecodeError as e:
            raise LoadError(f"not valid UTF-8 (byte {e.start}); re-encode the file as UTF-8") from None
        except csv.Error as e:
            yield Problem(str(path), f"CSV error: {e}; rows before it were read")


@register("csv", (".csv",), streaming=True)
def load_csv(path: Path, config: Config) -> Iterator[LoadItem]:
    """CSV with a header row, fields by mapping (``--map text=COLUMN``)."""
    m, st = _mapping(config), config.ingest.source_type
    return map_records(iter_csv(path), lambda rec, origin: record_to_document(rec, m, path, origin, st, "csv"))
