"""Persistent cache of model calls, keyed by model, operation, prompt and parameters.

Reruns and interrupted evaluations cost nothing twice: every backend method decorated with
:func:`cached` looks its key up in a SQLite file first.

Example::

    >>> import tempfile, pathlib
    >>> from medr2.llm.cache import LLMCache
    >>> c = LLMCache(pathlib.Path(tempfile.mkdtemp()) / "llm.sqlite")
    >>> key = c.key("m", "chat", {"prompt": "hi"})
    >>> c.get(key) is None
    True
    >>> c.put(key, {"text": "hello"}); c.get(key)
    {'text': 'hello'}
"""

from __future__ import annotations

import functools
import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from typing import Any, Callable, Optional


class LLMCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(model: str, op: str, params: dict[str, Any]) -> str:
        blob = json.dumps({"model": model, "op": op, "params": params}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def get(self, key: str) -> Optional[Any]:
        with self._lock:
            row = self._db.execute("SELECT value FROM calls WHERE key=?", (key,)).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        return json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO calls VALUES (?, ?)", (key, json.dumps(value, ensure_ascii=False)))

    def close(self) -> None:
        self._db.close()


def cached(op: str) -> Callable:
    """Decorator for backend methods: ``self.cache`` (may be None) and ``self.name`` key the call.

    The method's keyword arguments (all of them, defaults included) are part of the key.
    """

    def deco(fn: Callable) -> Callable:
        import inspect

        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(self, *args, **kwargs):
            cache: Optional[LLMCache] = getattr(self, "cache", None)
            if cache is None:
                return fn(self, *args, **kwargs)
            bound = sig.bind(self, *args, **kwargs)
            bound.apply_defaults()
            params = {k: v for k, v in bound.arguments.items() if k != "self"}
            key = cache.key(self.name, op, params)
            hit = cache.get(key)
            if hit is not None:
                from medr2.llm.base import record

                record(getattr(self, "usage", None), 0, 0, 0.0, cached=True)
                return hit
            value = fn(self, *args, **kwargs)
            cache.put(key, value)
            return value

        return wrapper

    return deco
