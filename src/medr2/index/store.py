"""Passage and metadata store behind a small interface: :class:`StoreSQL` holds the tables and
methods, :class:`SQLiteStore` runs them on the embedded engine (``DIR/store.sqlite``),
:class:`PGStore` on the server one (a PostgreSQL namespace); the engines are
:mod:`medr2.store.sqlite` and :mod:`medr2.store.postgres`.

Everything that defines the committed state of an index lives here: documents (with their
heading trees), passages (with stable TextIDs and the integer row id the vector and term
segments use), which files were ingested, and the list of live segments. One transaction
commits a batch, so a killed ingestion leaves the last committed state intact.

Example::

    >>> import tempfile, pathlib
    >>> from medr2.index.store import SQLiteStore
    >>> s = SQLiteStore(pathlib.Path(tempfile.mkdtemp()) / "store.sqlite")
    >>> s.counts()["documents"]
    0
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Iterable, Optional, Protocol

import numpy as np

from medr2.schema import Document, DocumentMeta, Passage
from medr2.store.postgres import PGFile
from medr2.store.sqlbase import SQLBase, ident, insert_ignore, marks, upsert
from medr2.store.sqlite import SQLiteFile

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS documents (
    doc_id TEXT PRIMARY KEY, title TEXT, source_type TEXT, year INTEGER, language TEXT,
    meta_json TEXT, sections_json TEXT, content_hash TEXT, n_passages INTEGER, added REAL);
CREATE TABLE IF NOT EXISTS passages (
    rowid INTEGER PRIMARY KEY, passage_id TEXT UNIQUE NOT NULL, doc_id TEXT NOT NULL, text TEXT NOT NULL,
    heading_path TEXT, start INTEGER, "end" INTEGER, language TEXT, unit INTEGER, ordinal INTEGER,
    source_type TEXT, year INTEGER);
CREATE INDEX IF NOT EXISTS passages_doc ON passages(doc_id);
CREATE INDEX IF NOT EXISTS passages_filter ON passages(source_type, year, language);
CREATE TABLE IF NOT EXISTS files (
    path TEXT PRIMARY KEY, sha256 TEXT, size INTEGER, status TEXT, n_docs INTEGER, problems INTEGER, updated REAL);
CREATE TABLE IF NOT EXISTS file_docs (path TEXT, doc_id TEXT, PRIMARY KEY (path, doc_id));
CREATE INDEX IF NOT EXISTS file_docs_doc ON file_docs(doc_id);
CREATE TABLE IF NOT EXISTS segments (name TEXT PRIMARY KEY, n_rows INTEGER, kind TEXT, created REAL);
"""


class Store(Protocol):
    """What the index needs from a store; a server engine can implement the same methods."""

    def transaction(self) -> Any: ...
    def get_meta(self, key: str, default: Optional[str] = None) -> Optional[str]: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def doc_hash(self, doc_id: str) -> Optional[str]: ...
    def put_document(self, doc: Document, content_hash: str, n_passages: int) -> None: ...
    def refresh_document(self, doc_id: str, meta: DocumentMeta, content_hash: str) -> None: ...
    def put_passages(self, rows: list[tuple[int, Passage, str, Optional[int]]]) -> None: ...
    def delete_documents(self, doc_ids: Iterable[str]) -> list[int]: ...
    def passages(self, rowids: Iterable[int]) -> dict[int, dict[str, Any]]: ...
    def live_rowids(self) -> np.ndarray: ...
    def filter_rowids(self, source_types=None, year_min=None, year_max=None, languages=None) -> np.ndarray: ...


DOCUMENT_COLUMNS = ["doc_id", "title", "source_type", "year", "language", "meta_json", "sections_json",
                    "content_hash", "n_passages", "added"]
PASSAGE_COLUMNS = ["rowid", "passage_id", "doc_id", "text", "heading_path", "start", "end", "language", "unit",
                   "ordinal", "source_type", "year"]
FILE_COLUMNS = ["path", "sha256", "size", "status", "n_docs", "problems", "updated"]

_PUT_DOCUMENT = upsert("documents", DOCUMENT_COLUMNS, ["doc_id"])
_PUT_PASSAGE = f"INSERT INTO passages ({', '.join(map(ident, PASSAGE_COLUMNS))}) VALUES ({marks(len(PASSAGE_COLUMNS))})"
_MARK_FILE = upsert("files", FILE_COLUMNS, ["path"])
_LINK_FILE = insert_ignore("file_docs", ["path", "doc_id"])


class StoreSQL(SQLBase):
    """The store's methods, in SQL both engines run (:class:`SQLiteStore`, :class:`PGStore`)."""

    SCHEMA = _SCHEMA
    SCHEMA_VERSION = 1
    MIGRATIONS: dict[int, tuple[str, ...]] = {}

    def next_rowid(self) -> int:
        row = self.db.execute("SELECT MAX(rowid) FROM passages").fetchone()
        high = int(self.get_meta("max_rowid", "0") or 0)
        return max(high, row[0] or 0) + 1

    # documents ----------------------------------------------------------------------------
    def doc_hash(self, doc_id: str) -> Optional[str]:
        row = self.db.execute("SELECT content_hash FROM documents WHERE doc_id=?", (doc_id,)).fetchone()
        return row[0] if row else None

    def put_document(self, doc: Document, content_hash: str, n_passages: int) -> None:
        self.db.execute(
            _PUT_DOCUMENT,
            (doc.doc_id, doc.title, doc.source_type.value, doc.meta.year, doc.meta.language,
             doc.meta.model_dump_json(), json.dumps([s.to_dict() for s in doc.sections], ensure_ascii=False),
             content_hash, n_passages, time.time()),
        )

    def refresh_document(self, doc_id: str, meta: DocumentMeta, content_hash: str) -> None:
        """A document read again unchanged: its metadata (where it was read from) and content hash."""
        self.db.execute("UPDATE documents SET meta_json=?, content_hash=? WHERE doc_id=?",
                        (meta.model_dump_json(), content_hash, doc_id))

    def get_document(self, doc_id: str) -> Optional[Document]:
        row = self.db.execute(
            "SELECT doc_id, title, source_type, meta_json, sections_json FROM documents WHERE doc_id=?", (doc_id,)
        ).fetchone()
        if not row:
            return None
        return Document.model_validate({
            "doc_id": row[0], "title": row[1], "source_type": row[2],
            "meta": json.loads(row[3]), "sections": json.loads(row[4]),
        })

    def doc_passages(self, doc_id: str) -> list[Passage]:
        rows = self.db.execute(
            'SELECT passage_id, doc_id, text, heading_path, start, "end", language, unit, ordinal '
            "FROM passages WHERE doc_id=? ORDER BY ordinal NULLS FIRST", (doc_id,)
        ).fetchall()
        return [Passage(passage_id=r[0], doc_id=r[1], text=r[2], heading_path=json.loads(r[3]), start=r[4],
                        end=r[5], language=r[6], unit=r[7], ordinal=r[8]) for r in rows]

    def put_passages(self, rows: list[tuple[int, Passage, str, Optional[int]]]) -> None:
        """rows: (rowid, passage, source_type, year); the row id keys the passage in the segments."""
        self.db.executemany(
            _PUT_PASSAGE,
            [(rid, p.passage_id, p.doc_id, p.text, json.dumps(p.heading_path, ensure_ascii=False), p.start, p.end,
              p.language, p.unit, p.ordinal, st, year) for rid, p, st, year in rows],
        )
        if rows:
            top = max(r[0] for r in rows)
            if top > int(self.get_meta("max_rowid", "0") or 0):
                self.set_meta("max_rowid", str(top))

    def delete_documents(self, doc_ids: Iterable[str], keep_links: bool = False) -> list[int]:
        """Delete documents and their passages; return the passages' row ids.

        ``keep_links`` keeps which files provide them (a document being replaced by a new version).
        """
        removed: list[int] = []
        for d in doc_ids:
            removed.extend(r[0] for r in self.db.execute("SELECT rowid FROM passages WHERE doc_id=?", (d,)))
            self.db.execute("DELETE FROM passages WHERE doc_id=?", (d,))
            self.db.execute("DELETE FROM documents WHERE doc_id=?", (d,))
            if not keep_links:
                self.db.execute("DELETE FROM file_docs WHERE doc_id=?", (d,))
        return removed

    def has_document(self, doc_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM documents WHERE doc_id=?", (doc_id,)).fetchone() is not None

    # passages -----------------------------------------------------------------------------
    def passages(self, rowids: Iterable[int]) -> dict[int, dict[str, Any]]:
        ids = [int(r) for r in rowids]
        out: dict[int, dict[str, Any]] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            q = (
                "SELECT p.rowid, p.passage_id, p.doc_id, p.text, p.heading_path, p.language, p.source_type, p.year, "
                'd.title, d.meta_json, p.start, p."end" FROM passages p JOIN documents d ON d.doc_id = p.doc_id '
                f"WHERE p.rowid IN ({marks(len(chunk))})"
            )
            for r in self.db.execute(q, chunk):
                meta = json.loads(r[9]) if r[9] else {}
                out[r[0]] = {
                    "passage_id": r[1], "doc_id": r[2], "text": r[3], "heading_path": json.loads(r[4]),
                    "language": r[5], "source_type": r[6], "year": r[7], "title": r[8],
                    "publication_types": meta.get("publication_types", []), "start": r[10], "end": r[11],
                }
        return out

    def rowids_of_docs(self, prefix: str) -> list[int]:
        """Row ids of the passages of every document whose id starts with ``prefix``."""
        pat = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        return [r[0] for r in self.db.execute("SELECT rowid FROM passages WHERE doc_id LIKE ? ESCAPE '\\'", (pat,))]

    def rowid_of(self, passage_id: str) -> Optional[int]:
        row = self.db.execute("SELECT rowid FROM passages WHERE passage_id=?", (passage_id,)).fetchone()
        return row[0] if row else None

    def live_rowids(self) -> np.ndarray:
        return np.fromiter((r[0] for r in self.db.execute("SELECT rowid FROM passages")), dtype=np.int64)

    def filter_rowids(self, source_types=None, year_min=None, year_max=None, languages=None) -> np.ndarray:
        where, args = [], []
        if source_types:
            where.append(f"source_type IN ({marks(len(source_types))})")
            args.extend(source_types)
        if languages:
            where.append(f"language IN ({marks(len(languages))})")
            args.extend(languages)
        if year_min is not None:
            where.append("year >= ?")
            args.append(year_min)
        if year_max is not None:
            where.append("year <= ?")
            args.append(year_max)
        q = "SELECT rowid FROM passages" + (" WHERE " + " AND ".join(where) if where else "")
        return np.fromiter((r[0] for r in self.db.execute(q, args)), dtype=np.int64)

    # files --------------------------------------------------------------------------------
    def file_state(self, path: str) -> Optional[tuple[str, str]]:
        row = self.db.execute("SELECT sha256, status FROM files WHERE path=?", (path,)).fetchone()
        return (row[0], row[1]) if row else None

    def mark_file(self, path: str, sha: str, size: int, status: str, n_docs: int, problems: int) -> None:
        self.db.execute(_MARK_FILE, (path, sha, size, status, n_docs, problems, time.time()))

    def link_file_docs(self, path: str, doc_ids: Iterable[str]) -> None:
        self.db.executemany(_LINK_FILE, [(path, d) for d in doc_ids])

    def file_doc_ids(self, path: str) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT doc_id FROM file_docs WHERE path=?", (path,))}

    def unlink_file_docs(self, path: str, doc_ids: Iterable[str]) -> None:
        self.db.executemany("DELETE FROM file_docs WHERE path=? AND doc_id=?", [(path, d) for d in doc_ids])

    def linked_elsewhere(self, doc_id: str, path: str) -> bool:
        """Whether a file other than ``path`` provides the document."""
        return self.db.execute("SELECT 1 FROM file_docs WHERE doc_id=? AND path<>? LIMIT 1",
                               (doc_id, path)).fetchone() is not None

    # segments -----------------------------------------------------------------------------
    def segments(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT name FROM segments ORDER BY created NULLS FIRST, name")]

    def add_segment(self, name: str, n_rows: int, kind: str) -> None:
        self.db.execute("INSERT INTO segments (name, n_rows, kind, created) VALUES (?,?,?,?)",
                        (name, n_rows, kind, time.time()))

    def remove_segments(self, names: Iterable[str]) -> None:
        self.db.executemany("DELETE FROM segments WHERE name=?", [(n,) for n in names])

    # stats --------------------------------------------------------------------------------
    def counts(self) -> dict[str, Any]:
        docs = self.db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        passages = self.db.execute("SELECT COUNT(*) FROM passages").fetchone()[0]
        by_type = {r[0]: {"documents": r[1]} for r in
                   self.db.execute("SELECT source_type, COUNT(*) FROM documents GROUP BY source_type")}
        for st, n in self.db.execute("SELECT source_type, COUNT(*) FROM passages GROUP BY source_type"):
            by_type.setdefault(st, {"documents": 0})["passages"] = n
        langs = dict(self.db.execute("SELECT language, COUNT(*) FROM passages GROUP BY language").fetchall())
        files = dict(self.db.execute("SELECT status, COUNT(*) FROM files GROUP BY status").fetchall())
        return {"documents": docs, "passages": passages, "by_source_type": by_type, "languages": langs,
                "files": files}


class SQLiteStore(StoreSQL, SQLiteFile):
    def __init__(self, path: Path):
        # synchronous=FULL: a commit survives power loss, not only a killed process
        super().__init__(path, self.SCHEMA, synchronous="FULL")


class PGStore(StoreSQL, PGFile):
    """The index store in a PostgreSQL namespace (``backend.json``: ``"store": "postgres"``)."""

    def __init__(self, uri: str, namespace: str):
        super().__init__(uri, namespace, self.SCHEMA)
