"""The SQLite file both stores build on (the index's passages and the knowledge graph): WAL
journal, nestable transactions (a nested block joins the outer one; an error rolls the whole
transaction back), and a key-value ``meta`` table with the schema version (migrations and the
portable SQL are shared with the PostgreSQL engine: :mod:`medr2.store.sqlbase`).

Example::

    >>> import tempfile, pathlib
    >>> from medr2.store.sqlite import SQLiteFile
    >>> f = SQLiteFile(pathlib.Path(tempfile.mkdtemp()) / "x.sqlite", "CREATE TABLE IF NOT EXISTS meta "
    ...                "(key TEXT PRIMARY KEY, value TEXT NOT NULL);")
    >>> with f.transaction():
    ...     f.set_meta("k", "v")
    >>> f.get_meta("k")
    'v'
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

from medr2.store.sqlbase import SQLBase


class SQLiteFile(SQLBase):
    def __init__(self, path: Path, schema: Optional[str] = None, synchronous: str = "FULL"):
        self.path = Path(path)
        self.db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        self.db.execute("PRAGMA foreign_keys=OFF")
        self._depth = 0
        try:
            fresh = not self._has_table("meta")
            if not fresh:
                self._migrate()  # before the schema text, which describes the newest version
            self.db.executescript(schema if schema is not None else self.SCHEMA)
            if fresh:
                self._record_version()
        except BaseException:
            self.db.close()
            raise

    def describe(self) -> str:
        return str(self.path)

    def _has_table(self, name: str) -> bool:
        return self.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None

    def _ddl(self, statement: str) -> None:
        self.db.execute(statement)

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if self._depth:
            with self._join_outer():
                yield
            return
        self.db.execute("BEGIN IMMEDIATE")
        self._depth = 1
        try:
            yield
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        else:
            self.db.execute("COMMIT")
        finally:
            self._depth = 0
