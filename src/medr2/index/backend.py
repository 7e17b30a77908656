"""Which engines an index runs on, fixed when it is created and kept in ``DIR/backend.json``.

The embedded default needs no file (vectors and terms in segment files, documents and passages
in ``DIR/store.sqlite``). Otherwise the file names the engines::

    {"vectors": "milvus", "milvus_uri": "milvus.db", "collection": "medr2_pubmed_1a2b3c4d",
     "analyzer": "medr2", "dense_index": "FLAT", "dense_params": {}, "search_params": {},
     "store": "postgres", "postgres_uri": "postgresql://medr2@db:5432/medr2",
     "namespace": "medr2_pubmed_1a2b3c4d"}

A relative ``milvus_uri`` is a Milvus Lite file inside DIR. Secrets are never written here: a
PostgreSQL password comes from ``PGPASSWORD`` (or ``~/.pgpass``), a Milvus token from the
environment variable ``index.token_env`` names.

Example::

    >>> import tempfile, pathlib
    >>> from medr2.config import IndexConfig
    >>> from medr2.index.backend import new_spec
    >>> spec = new_spec(IndexConfig(backend="milvus"), pathlib.Path(tempfile.mkdtemp()) / "pubmed")
    >>> spec["vectors"], spec["milvus_uri"], spec["collection"].startswith("medr2_pubmed_")
    ('milvus', 'milvus.db', True)
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from typing import Any, Optional
from urllib.parse import urlsplit, urlunsplit

from medr2.config import IndexConfig

SPEC_FILE = "backend.json"
_SPEC_KEYS = {"backend": "vectors", "analyzer": "analyzer", "dense_index": "dense_index",
              "dense_params": "dense_params", "store": "store"}


class BackendError(RuntimeError):
    """An engine an index needs cannot be used; the message names it and what to do."""


def read_spec(path: Path) -> dict[str, Any]:
    """The backend spec of the index in ``path`` ({} for the embedded default)."""
    f = Path(path) / SPEC_FILE
    if not f.exists():
        return {}
    try:
        spec = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise BackendError(f"{f} is not readable JSON ({e}); restore it from the index's backup or rebuild") from None
    if not isinstance(spec, dict):
        raise BackendError(f"{f} must hold a JSON object")
    return spec


def write_spec(path: Path, spec: dict[str, Any]) -> None:
    tmp = Path(path) / (SPEC_FILE + ".tmp")
    tmp.write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, Path(path) / SPEC_FILE)


def is_default(spec: dict[str, Any]) -> bool:
    return spec.get("vectors", "embedded") == "embedded" and spec.get("store", "sqlite") == "sqlite"


def namespace_for(path: Path) -> str:
    """A name for the index's collection / schema: its directory name and a random suffix."""
    slug = re.sub(r"[^a-z0-9]+", "_", Path(path).name.lower()).strip("_")[:24] or "index"
    return f"medr2_{slug}_{uuid.uuid4().hex[:8]}"


def strip_password(uri: str) -> str:
    """The URI without its password (what may be written to disk or shown)."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    user = parts.username or ""
    return urlunsplit((parts.scheme, f"{user}@{host}" if user else host, parts.path, parts.query, parts.fragment))


def milvus_uri(uri: str) -> str:
    """Normalise what users write: ``milvus://host:port`` -> ``http://host:port``; paths stay."""
    if uri.startswith("milvus://"):
        return "http://" + uri[len("milvus://"):]
    if uri.startswith("milvus-lite:"):
        return uri[len("milvus-lite:"):]
    return uri


def new_spec(cfg: IndexConfig, path: Path) -> dict[str, Any]:
    """The spec a new index in ``path`` gets from the config."""
    spec: dict[str, Any] = {"vectors": cfg.backend, "store": cfg.store}
    ns = namespace_for(path)
    if cfg.backend == "milvus":
        spec.update(milvus_uri=milvus_uri(cfg.uri) if cfg.uri else "milvus.db", collection=ns,
                    analyzer=cfg.analyzer, dense_index=cfg.dense_index, dense_params=dict(cfg.dense_params),
                    search_params=dict(cfg.search_params), token_env=cfg.token_env)
    if cfg.store == "postgres":
        if not cfg.store_uri:
            raise BackendError("index.store = 'postgres' needs index.store_uri (postgresql://user@host:5432/db), "
                               "or --store-uri on the command line")
        spec.update(postgres_uri=strip_password(cfg.store_uri), namespace=ns)
    return spec


def check_agrees(spec: dict[str, Any], cfg: IndexConfig, path: Path) -> None:
    """Refuse explicit settings that contradict the engines an existing index runs on."""
    for key, spec_key in _SPEC_KEYS.items():
        if key not in cfg.model_fields_set:
            continue
        have = spec.get(spec_key, IndexConfig.model_fields[key].default)
        if have != getattr(cfg, key):
            raise BackendError(f"index {path} was created with index.{key}={have!r}, the config or command line "
                               f"asks {getattr(cfg, key)!r}; an index keeps its engines: use `medr2 index migrate` "
                               "or build a new index")


def lite_path(spec: dict[str, Any], path: Path) -> Optional[Path]:
    """The Milvus Lite file of a spec (None for a server URI)."""
    uri = spec.get("milvus_uri", "")
    if re.match(r"^[a-z]+://", uri):
        return None
    p = Path(uri)
    return p if p.is_absolute() else Path(path) / p


def client_uri(spec: dict[str, Any], path: Path) -> str:
    lite = lite_path(spec, path)
    return str(lite) if lite is not None else spec["milvus_uri"]


def open_store(spec: dict[str, Any], path: Path, store_uri: Optional[str] = None):
    """The document/passage store of an index: SQLite in DIR or PostgreSQL.

    ``store_uri`` may carry the password when the index is being created (it is not stored).
    """
    if spec.get("store", "sqlite") == "postgres":
        try:
            from medr2.index.postgres import PGStore
        except ImportError as e:  # pragma: no cover - psycopg is a dependency
            raise BackendError(f"the PostgreSQL store needs psycopg ({e}); pip install 'psycopg[binary]'") from None
        return PGStore(store_uri or spec["postgres_uri"], spec["namespace"])
    from medr2.index.store import SQLiteStore

    return SQLiteStore(Path(path) / "store.sqlite")
