"""PostgreSQL engine for the two metadata stores: :class:`PGStore` (documents, passages, files,
segments; the methods of :class:`medr2.index.store.StoreSQL`) and :class:`PGKGStore` (the
knowledge graph; the methods of :class:`medr2.kg.store.GraphSQL`). The SQL is the same text
the SQLite engine runs (:mod:`medr2.index.sqlbase`); :class:`PGFile` translates ``?``
placeholders to ``%s`` and the schema's SQLite types (INTEGER -> BIGINT, REAL -> DOUBLE
PRECISION, TEXT -> TEXT COLLATE "C" so that sorting and ``LOWER`` match SQLite's byte order
and ASCII folding, ``INTEGER PRIMARY KEY AUTOINCREMENT`` -> an identity column).

* Each store lives in its own PostgreSQL schema (the *namespace*, set as ``search_path``), so an
  index store, its graph store (``NAMESPACE_kg``) and several indexes share one database.
* Writer transactions serialise like SQLite's ``BEGIN IMMEDIATE``: every transaction first takes
  ``pg_advisory_xact_lock`` on the namespace, so concurrent reviewers or API processes doing
  read-modify-write never lose an update; an error rolls the whole transaction back; a nested
  ``transaction()`` joins the outer one.
* Thread safety: the thread running a transaction has the writer connection to itself (others
  wait for the commit before their own transaction); statements outside a transaction go, one at
  a time, through a second connection in autocommit, so a read never leaves a session "idle in
  transaction" and sees only committed data.
* Connection: a libpq URI (``postgresql://user@host:5432/db``; the password in the URI or
  ``PGPASSWORD``). When the server cannot be reached, :class:`PGConnectionError` (an
  ``OSError``) names the URI without its password and what to check.

An index directory chooses the engine in ``DIR/backend.json`` (:func:`read_backend_spec`):
``{"store": "postgres", "postgres_uri": "postgresql://...", "namespace": "myindex"}``; the
index store is ``PGStore(postgres_uri, namespace)``, its graph ``PGKGStore(postgres_uri,
namespace + "_kg")``.

Example (needs a server; ``drop_namespace`` removes everything the store created)::

    >>> from medr2.index.postgres import PGStore, drop_namespace, redact_uri
    >>> redact_uri("postgresql://medr2:secret@db.example:5432/medr2")
    'postgresql://medr2:***@db.example:5432/medr2'
    >>> s = PGStore("postgresql://medr2@localhost/medr2", "demo_index")  # doctest: +SKIP
    >>> s.counts()["documents"]  # doctest: +SKIP
    0
    >>> s.close(); drop_namespace("postgresql://medr2@localhost/medr2", "demo_index")  # doctest: +SKIP
"""

from __future__ import annotations

import hashlib
import re
import threading
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from medr2.index.sqlbase import SQLBase
from medr2.index.store import StoreSQL
from medr2.kg.store import GraphSQL

KG_SUFFIX = "_kg"
_NAMESPACE = re.compile(r"^[a-z_][a-z0-9_]*$")
_CONNECT_TIMEOUT_S = 10


class PGConnectionError(ConnectionError):
    """The PostgreSQL server named by a URI could not be reached or refused the login."""


# -- index directory: which engine ----------------------------------------------------------------
def read_backend_spec(index_dir: str | Path) -> dict[str, Any]:
    """The engines an index directory runs on (``DIR/backend.json``, written when the index was
    created: :mod:`medr2.index.backend`); ``{}`` when the file is absent (the embedded default).

    Checked here: ``store`` is "sqlite" or "postgres", and "postgres" comes with ``postgres_uri``
    and a usable ``namespace``; other keys (the vector engine's) pass through. A problem raises
    :class:`medr2.index.backend.BackendError` naming the file."""
    from medr2.index.backend import SPEC_FILE, BackendError, read_spec

    spec = read_spec(Path(index_dir))
    where = Path(index_dir) / SPEC_FILE
    store = spec.get("store", "sqlite")
    if store not in ("sqlite", "postgres"):
        raise BackendError(f"{where}: store must be \"sqlite\" or \"postgres\", not {store!r}")
    if store == "postgres":
        for key in ("postgres_uri", "namespace"):
            if not isinstance(spec.get(key), str) or not spec[key]:
                raise BackendError(f"{where}: \"store\": \"postgres\" needs {key!r} (a non-empty string); "
                                   "restore the file or rebuild the index")
        try:
            check_namespace(spec["namespace"] + KG_SUFFIX)
        except ValueError as e:
            raise BackendError(f"{where}: {e}") from None
    return spec


def uses_postgres(spec: dict[str, Any]) -> bool:
    return spec.get("store") == "postgres"


def is_index_dir(index_dir: str | Path) -> bool:
    """Whether the directory holds a medr2 index (a ``store.sqlite`` file, or a ``backend.json``
    naming a PostgreSQL store)."""
    p = Path(index_dir)
    return (p / "store.sqlite").is_file() or uses_postgres(read_backend_spec(p))


# -- SQL translation -----------------------------------------------------------------------------
def check_namespace(namespace: str) -> str:
    if not isinstance(namespace, str) or not _NAMESPACE.match(namespace) or len(namespace.encode()) > 63 \
            or namespace.startswith("pg_"):
        raise ValueError(f"PostgreSQL namespace {namespace!r} is not usable: use lower-case letters, digits and "
                         "'_', starting with a letter or '_', at most 63 characters (60 for an index: its graph "
                         "adds '_kg'), not starting with 'pg_'")
    return namespace


@lru_cache(maxsize=4096)
def pg_query(text: str) -> str:
    """SQL with ``?`` placeholders as psycopg wants it: ``%s`` placeholders, literal ``%`` doubled.

    >>> pg_query("SELECT a FROM t WHERE b LIKE '%x?' AND c=?")
    "SELECT a FROM t WHERE b LIKE '%%x?' AND c=%s"
    """
    out, quoted = [], False
    for ch in text:
        if ch == "'":
            quoted = not quoted
        if ch == "%":
            out.append("%%")
        elif ch == "?" and not quoted:
            out.append("%s")
        else:
            out.append(ch)
    return "".join(out)


def pg_schema(schema: str) -> list[str]:
    """The statements of a SQLite-typed schema text, in PostgreSQL types.

    >>> pg_schema("CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, x REAL, n INTEGER, s TEXT NOT NULL);")
    ['CREATE TABLE t (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, x DOUBLE PRECISION, n BIGINT, s TEXT COLLATE "C" NOT NULL)']
    """
    s = re.sub(r"\bINTEGER PRIMARY KEY AUTOINCREMENT\b", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", schema)
    s = re.sub(r"\bINTEGER\b", "BIGINT", s)
    s = re.sub(r"\bREAL\b", "DOUBLE PRECISION", s)
    s = re.sub(r"\bBLOB\b", "BYTEA", s)
    s = re.sub(r"\bTEXT\b", 'TEXT COLLATE "C"', s)
    return [st.strip() for st in s.split(";") if st.strip()]


def redact_uri(uri: str) -> str:
    """The URI (or key=value connection string) with its password replaced by ``***``.

    >>> redact_uri("postgresql:///db?host=/tmp/s&password=x&user=u")
    'postgresql:///db?host=/tmp/s&password=***&user=u'
    """
    out = re.sub(r"^(postgres(?:ql)?://[^:/@?]*):[^@/?]*@", r"\1:***@", uri)
    out = re.sub(r"([?&]password=)[^&]*", r"\1***", out)
    return re.sub(r"(^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", r"\1password=***", out)


def _quote(name: str) -> str:
    return '"' + name + '"'  # namespaces are checked: lower-case letters, digits, '_'


def _lock_key(namespace: str) -> int:
    """A signed 64-bit advisory-lock key for the namespace."""
    return int.from_bytes(hashlib.sha256(f"medr2:{namespace}".encode()).digest()[:8], "big", signed=True)


def _connect(uri: str, namespace: Optional[str]):
    try:
        import psycopg
    except ImportError:  # pragma: no cover - a dependency of medr2
        raise PGConnectionError("the PostgreSQL store needs psycopg: pip install 'psycopg[binary]==3.3.9'") from None
    extra: dict[str, Any] = {"autocommit": True, "application_name": "medr2"}
    if "connect_timeout" not in uri:
        extra["connect_timeout"] = _CONNECT_TIMEOUT_S
    try:
        conn = psycopg.connect(uri, **extra)
    except psycopg.Error as e:
        reason = " ".join(str(e).split()) or type(e).__name__
        raise PGConnectionError(
            f"cannot connect to PostgreSQL at {redact_uri(uri)}: {reason}. Check that the server is running and "
            "reachable (e.g. `pg_ctlcluster 15 main start`, `pg_isready -h HOST -p PORT`), that the user, database "
            "and port in the URI are right, and give the password in the URI or in PGPASSWORD") from None
    if namespace is not None:
        conn.execute(f"SET search_path TO {_quote(namespace)}")
    return conn


def ping(uri: str) -> None:
    """Connect once and disconnect; :class:`PGConnectionError` when the server cannot be reached."""
    _connect(uri, None).close()


def drop_namespace(uri: str, namespace: str) -> None:
    """Delete a namespace and everything in it (a store's tables); nothing when it is absent."""
    conn = _connect(uri, None)
    try:
        conn.execute(f"DROP SCHEMA IF EXISTS {_quote(check_namespace(namespace))} CASCADE")
    finally:
        conn.close()


def namespace_exists(uri: str, namespace: str) -> bool:
    """Whether a store was created in the namespace (it has a ``meta`` table)."""
    conn = _connect(uri, None)
    try:
        row = conn.execute("SELECT to_regclass(%s)", (f"{_quote(check_namespace(namespace))}.meta",)).fetchone()
        return row[0] is not None
    finally:
        conn.close()


# -- the engine -----------------------------------------------------------------------------------
class _Statements:
    """``PGFile.db``: ``execute`` / ``executemany`` with ``?`` placeholders, on the right connection."""

    def __init__(self, owner: "PGFile"):
        self._owner = owner

    def execute(self, sql: str, params: Sequence[Any] = ()):
        with self._owner._connection() as conn:
            return conn.execute(pg_query(sql), tuple(params))

    def executemany(self, sql: str, rows):
        rows = [tuple(r) for r in rows]
        with self._owner._connection() as conn:
            cur = conn.cursor()
            if rows:
                cur.executemany(pg_query(sql), rows)
            return cur


class PGFile(SQLBase):
    """A store in one PostgreSQL namespace, with the surface of :class:`medr2.index.sqlite.SQLiteFile`."""

    path = None  # no file on disk

    def __init__(self, uri: str, namespace: str, schema: Optional[str] = None):
        self.uri = uri
        self.namespace = check_namespace(namespace)
        self._key = _lock_key(namespace)
        self._tx_lock = threading.Lock()  # held by the thread running a transaction
        self._tx_owner: Optional[int] = None
        self._depth = 0
        self._auto_lock = threading.Lock()  # one autocommit statement at a time
        self._writer = None
        self._auto = None
        self._closed = False
        self.db = _Statements(self)
        try:
            self._auto = _connect(uri, self.namespace)
            self._open_schema(schema if schema is not None else self.SCHEMA)
        except BaseException:
            self.close()
            raise

    def describe(self) -> str:
        return f"{redact_uri(self.uri)} namespace {self.namespace}"

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"

    # connections ---------------------------------------------------------------------------------
    def _live(self, conn):
        if self._closed:
            raise RuntimeError(f"the store {self.describe()} is closed")
        if conn is None or conn.closed or conn.broken:
            if conn is not None:
                conn.close()
            conn = _connect(self.uri, self.namespace)
        return conn

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        if self._tx_owner == threading.get_ident():
            yield self._writer  # inside this thread's transaction
            return
        with self._auto_lock:
            self._auto = self._live(self._auto)
            yield self._auto

    @contextmanager
    def transaction(self) -> Iterator[None]:
        me = threading.get_ident()
        if self._tx_owner == me:
            with self._join_outer():
                yield
            return
        with self._tx_lock:
            self._writer = conn = self._live(self._writer)
            conn.execute("BEGIN")
            self._tx_owner, self._depth = me, 1
            try:
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._key,))
                yield
            except BaseException:
                self._rollback(conn)
                raise
            else:
                conn.execute("COMMIT")
            finally:
                self._tx_owner, self._depth = None, 0

    @staticmethod
    def _rollback(conn) -> None:
        try:
            conn.execute("ROLLBACK")
        except Exception:  # the connection broke: the server rolled back already
            conn.close()

    def close(self) -> None:
        self._closed = True
        for conn in (self._writer, self._auto):
            if conn is not None and not conn.closed:
                conn.close()

    # schema --------------------------------------------------------------------------------------
    def _has_table(self, name: str) -> bool:
        row = self.db.execute("SELECT to_regclass(?)", (f"{_quote(self.namespace)}.{_quote(name)}",)).fetchone()
        return row[0] is not None

    def _ddl(self, statement: str) -> None:
        for st in pg_schema(statement):
            self.db.execute(st)

    def _open_schema(self, schema: str) -> None:
        if self._has_table("meta") and self.schema_version() == self.SCHEMA_VERSION:
            return  # the usual case: nothing to create, no lock taken
        with self.transaction():
            self.db.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(self.namespace)}")
            fresh = not self._has_table("meta")
            if not fresh:
                self._migrate()  # joins this transaction
            self._ddl(schema)
            if fresh:
                self._record_version()


class PGStore(StoreSQL, PGFile):
    """The index store (:class:`medr2.index.store.SQLiteStore`'s methods) in a PostgreSQL namespace."""

    def __init__(self, uri: str, namespace: str):
        super().__init__(uri, namespace, self.SCHEMA)


class PGKGStore(GraphSQL, PGFile):
    """The graph store (:class:`medr2.kg.store.KGStore`'s methods) in a PostgreSQL namespace."""

    def __init__(self, uri: str, namespace: str):
        super().__init__(uri, namespace, self.SCHEMA)
