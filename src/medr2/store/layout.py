"""What an index directory holds and which engines it runs on, fixed when it is created.

Layout::

    DIR/store.sqlite      documents, passages, files, live segments, config (embedded store)
    DIR/kg.sqlite         the knowledge graph (embedded store)
    DIR/segments/NAME/    vectors and terms (embedded vectors)
    DIR/backend.json      the engines, when they are not the embedded ones
    DIR/milvus.db         a Milvus Lite file (Milvus chosen without a server URI)

The embedded default needs no ``backend.json``. Otherwise the file names the engines::

    {"vectors": "milvus", "milvus_uri": "milvus.db", "collection": "medr2_pubmed_1a2b3c4d",
     "analyzer": "medr2", "dense_index": "FLAT", "dense_params": {}, "search_params": {},
     "store": "postgres", "postgres_uri": "postgresql://medr2@db:5432/medr2",
     "namespace": "medr2_pubmed_1a2b3c4d"}

A relative ``milvus_uri`` is a Milvus Lite file inside DIR. With ``"store": "postgres"`` the
index store lives in the PostgreSQL namespace ``namespace`` and its graph in ``namespace_kg``.
Secrets are never written here: a PostgreSQL password comes from ``PGPASSWORD`` (or
``~/.pgpass``), a Milvus token from the environment variable ``index.token_env`` names.

Which classes serve these engines is the index's choice (:mod:`medr2.index.backend`) and the
graph's (:func:`medr2.kg.build.open_kg`); this module only reads and writes the directory.

Example::

    >>> import tempfile, pathlib
    >>> from medr2.config import IndexConfig
    >>> from medr2.store.layout import is_index_dir, new_spec
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "pubmed"
    >>> spec = new_spec(IndexConfig(backend="milvus"), d)
    >>> spec["vectors"], spec["milvus_uri"], spec["collection"].startswith("medr2_pubmed_")
    ('milvus', 'milvus.db', True)
    >>> is_index_dir(d)
    False
"""

from __future__ import annotations

import json
import os
import re
import uuid
from pathlib import Path
from typing import Any, Optional

from medr2.config import IndexConfig
from medr2.store.postgres import check_namespace
from medr2.store.uri import milvus_uri, strip_password

STORE_FILE = "store.sqlite"
SPEC_FILE = "backend.json"
KG_SUFFIX = "_kg"  # the graph of an index whose store is PostgreSQL: namespace + KG_SUFFIX
_SPEC_KEYS = {"backend": "vectors", "analyzer": "analyzer", "dense_index": "dense_index",
              "dense_params": "dense_params", "store": "store"}


class BackendError(RuntimeError):
    """An engine an index needs cannot be used; the message names it and what to do."""


# -- reading and writing the spec -------------------------------------------------------------------
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


def read_backend_spec(index_dir: str | Path) -> dict[str, Any]:
    """:func:`read_spec` with the store's part checked: ``store`` is "sqlite" or "postgres", and
    "postgres" comes with ``postgres_uri`` and a usable ``namespace``; other keys (the vector
    engine's) pass through. A problem raises :class:`BackendError` naming the file."""
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


def write_spec(path: Path, spec: dict[str, Any]) -> None:
    tmp = Path(path) / (SPEC_FILE + ".tmp")
    tmp.write_text(json.dumps(spec, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, Path(path) / SPEC_FILE)


def is_default(spec: dict[str, Any]) -> bool:
    return spec.get("vectors", "embedded") == "embedded" and spec.get("store", "sqlite") == "sqlite"


def uses_postgres(spec: dict[str, Any]) -> bool:
    return spec.get("store") == "postgres"


def is_index_dir(index_dir: str | Path) -> bool:
    """Whether the directory holds a medr2 index (a ``store.sqlite`` file, or a ``backend.json``
    naming a PostgreSQL store)."""
    p = Path(index_dir)
    return (p / STORE_FILE).is_file() or uses_postgres(read_backend_spec(p))


# -- a new index ------------------------------------------------------------------------------------
def namespace_for(path: Path) -> str:
    """A name for the index's collection / schema: its directory name and a random suffix."""
    slug = re.sub(r"[^a-z0-9]+", "_", Path(path).name.lower()).strip("_")[:24] or "index"
    return f"medr2_{slug}_{uuid.uuid4().hex[:8]}"


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


# -- where the engines are --------------------------------------------------------------------------
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
