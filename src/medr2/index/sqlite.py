"""The SQLite file both stores build on (the index's passages and the knowledge graph): WAL
journal, nestable transactions (a nested block joins the outer one; an error rolls the whole
transaction back), and a key-value ``meta`` table.

Example::

    >>> import tempfile, pathlib
    >>> from medr2.index.sqlite import SQLiteFile
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


class SQLiteFile:
    def __init__(self, path: Path, schema: str, synchronous: str = "FULL"):
        self.path = Path(path)
        self.db = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute(f"PRAGMA synchronous={synchronous}")
        self.db.execute("PRAGMA foreign_keys=OFF")
        self.db.executescript(schema)
        self._depth = 0

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if self._depth:
            self._depth += 1
            try:
                yield
            finally:
                self._depth -= 1
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

    def get_meta(self, key: str, default: Optional[str] = None) -> Optional[str]:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))
