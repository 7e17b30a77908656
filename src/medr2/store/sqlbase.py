"""What the two store engines (SQLite, PostgreSQL) share: portable SQL text and the schema
version with its migrations. The index store (:mod:`medr2.index.store`) and the graph store
(:mod:`medr2.kg.store`) write their SQL with these helpers and build on :class:`SQLBase`.

The stores' SQL is written once and runs on both engines: ``?`` placeholders (the PostgreSQL
engine translates them), ``INSERT ... ON CONFLICT`` instead of ``INSERT OR REPLACE`` /
``INSERT OR IGNORE`` (SQLite >= 3.24), ``RETURNING`` instead of ``lastrowid`` (SQLite >= 3.35),
an alias on every subquery in ``FROM``, double quotes around column names PostgreSQL reserves
(``"end"``, ``"symmetric"``), ``NULLS FIRST/LAST`` where a sorted column can be NULL, and no
engine-only functions. Column types are written the SQLite way (INTEGER, REAL, TEXT); the
PostgreSQL engine maps them.

Each store records its ``schema_version`` in its ``meta`` table. ``MIGRATIONS[n]`` holds the
portable statements that take a store from version n-1 to n; both engines run the same ones,
in one transaction, when a store is opened.

Example::

    >>> from medr2.store.sqlbase import upsert, insert_ignore, marks
    >>> upsert("meta", ["key", "value"], ["key"])
    'INSERT INTO meta ("key", "value") VALUES (?, ?) ON CONFLICT ("key") DO UPDATE SET "value" = excluded."value"'
    >>> insert_ignore("file_docs", ["path", "doc_id"])
    'INSERT INTO file_docs ("path", "doc_id") VALUES (?, ?) ON CONFLICT DO NOTHING'
    >>> marks(3)
    '?,?,?'
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Any, ClassVar, Iterable, Iterator, Optional, Sequence

VERSION_KEY = "schema_version"


class SchemaVersionError(RuntimeError):
    """The store was written by a newer medr2 (a schema version this one does not know)."""


def ident(name: str) -> str:
    """A quoted SQL identifier (the same on both engines)."""
    return '"' + name.replace('"', '""') + '"'


def marks(n: int) -> str:
    """``n`` comma-separated ``?`` placeholders (for ``IN (...)`` lists)."""
    return ",".join("?" * n)


def upsert(table: str, columns: Sequence[str], key: Sequence[str], keep: Iterable[str] = ()) -> str:
    """``INSERT`` of every column that updates the existing row on a ``key`` conflict: what
    ``INSERT OR REPLACE`` did for a table whose only unique constraint is ``key``. Columns in
    ``keep`` are not overwritten."""
    fixed = set(key) | set(keep)
    sets = [f"{ident(c)} = excluded.{ident(c)}" for c in columns if c not in fixed]
    head = (f"INSERT INTO {table} ({', '.join(ident(c) for c in columns)}) VALUES ({', '.join('?' * len(columns))}) "
            f"ON CONFLICT ({', '.join(ident(k) for k in key)})")
    return head + (" DO UPDATE SET " + ", ".join(sets) if sets else " DO NOTHING")


def insert_ignore(table: str, columns: Sequence[str]) -> str:
    """``INSERT`` that skips a row conflicting with an existing one (was ``INSERT OR IGNORE``)."""
    return (f"INSERT INTO {table} ({', '.join(ident(c) for c in columns)}) VALUES ({', '.join('?' * len(columns))}) "
            "ON CONFLICT DO NOTHING")


def ascii_lower(text: str) -> str:
    """Lower-case ASCII letters only: what SQLite's ``LOWER`` and case-insensitive ``LIKE`` fold
    (and PostgreSQL's ``LOWER`` under the "C" collation the PostgreSQL engine gives text columns)."""
    return "".join(chr(ord(c) + 32) if "A" <= c <= "Z" else c for c in text)


class SQLBase:
    """The engine-independent part of a store file: ``meta`` and the schema version.

    An engine provides ``db`` (``execute(sql, params)``), ``transaction()``, ``_has_table(name)``
    and ``_ddl(statement)``; a store sets ``SCHEMA``, ``SCHEMA_VERSION`` and ``MIGRATIONS``.
    """

    SCHEMA: ClassVar[str] = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    SCHEMA_VERSION: ClassVar[int] = 1
    # MIGRATIONS[n]: portable statements taking a store from version n-1 to n (both engines run them)
    MIGRATIONS: ClassVar[dict[int, tuple[str, ...]]] = {}
    db: Any


    @contextmanager
    def _join_outer(self) -> Iterator[None]:
        """A nested ``transaction()`` block: it joins the outer transaction."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1

    def describe(self) -> str:
        """The store's location for messages (a file path, or a database and namespace)."""
        return type(self).__name__

    def get_meta(self, key: str, default: Optional[str] = None) -> Optional[str]:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, key: str, value: str) -> None:
        self.db.execute(_SET_META, (key, value))

    def schema_version(self) -> int:
        """The stored schema version; a store made before versions were recorded is version 1."""
        raw = self.get_meta(VERSION_KEY)
        try:
            return int(raw) if raw is not None else 1
        except ValueError:
            raise SchemaVersionError(f"{self.describe()}: meta {VERSION_KEY}={raw!r} is not a number; "
                                     "the store is damaged, rebuild it") from None

    def _record_version(self) -> None:
        with self.transaction():
            self.set_meta(VERSION_KEY, str(self.SCHEMA_VERSION))

    def _migrate(self) -> None:
        """Bring an existing store to ``SCHEMA_VERSION`` (no-op when it is there)."""
        if self.schema_version() == self.SCHEMA_VERSION:
            return
        with self.transaction():
            have = self.schema_version()  # again, under the write lock: another process may have done it
            if have > self.SCHEMA_VERSION:
                raise SchemaVersionError(
                    f"{self.describe()} has schema version {have}, newer than this medr2 knows "
                    f"({self.SCHEMA_VERSION}); upgrade medr2 to open it")
            for n in range(have + 1, self.SCHEMA_VERSION + 1):
                for statement in self.MIGRATIONS.get(n, ()):
                    self._ddl(statement)
                self.set_meta(VERSION_KEY, str(n))

    def _has_table(self, name: str) -> bool:  # pragma: no cover - engines implement it
        raise NotImplementedError

    def _ddl(self, statement: str) -> None:  # pragma: no cover - engines implement it
        raise NotImplementedError


_SET_META = upsert("meta", ["key", "value"], ["key"])
