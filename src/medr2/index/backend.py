"""Which classes serve the engines an index runs on (written in ``DIR/backend.json``, read and
checked by :mod:`medr2.store.layout`):

* the document/passage store: :class:`medr2.index.store.SQLiteStore` (``DIR/store.sqlite``) or
  :class:`medr2.index.store.PGStore` (a PostgreSQL namespace), :func:`open_store`;
* the vectors and terms: the embedded segments (:class:`medr2.index.index.Index`) or a Milvus
  collection (:class:`medr2.index.milvus.MilvusIndex`), :func:`index_class`. The classes are
  named in :data:`VECTOR_ENGINES` and imported when an index that needs one is opened: the
  Milvus index builds on the embedded one, which does not import it.

Example::

    >>> from medr2.index.backend import index_class
    >>> index_class({}) is None, index_class({"vectors": "milvus"}).__name__
    (True, 'MilvusIndex')
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any, Optional

from medr2.index.store import PGStore, SQLiteStore
from medr2.store.layout import STORE_FILE

# vector engine of backend.json -> "module:class"; the embedded engine is the Index class itself
VECTOR_ENGINES = {"milvus": "medr2.index.milvus:MilvusIndex"}


def index_class(spec: dict[str, Any]) -> Optional[type]:
    """The index class of the spec's vector engine; None for the embedded engine (the class
    :meth:`medr2.index.index.Index.open` was called on serves it)."""
    target = VECTOR_ENGINES.get(spec.get("vectors", "embedded"))
    if target is None:
        return None
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def open_store(spec: dict[str, Any], path: Path, store_uri: Optional[str] = None):
    """The document/passage store of an index: SQLite in DIR or PostgreSQL.

    ``store_uri`` may carry the password when the index is being created (it is not stored).
    """
    if spec.get("store", "sqlite") == "postgres":
        return PGStore(store_uri or spec["postgres_uri"], spec["namespace"])
    return SQLiteStore(Path(path) / STORE_FILE)
