"""Built terminology tables cached as JSON: the key names every input (a version, the sources,
the files' stamps), so a changed file or source list builds anew.

Example::

    >>> import tempfile, pathlib
    >>> from medr2.terminology.cache import cached_json, file_stamp
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> cached_json(d, "demo", {"v": 1}, lambda: {"ckd": ["chronic kidney disease"]})
    {'ckd': ['chronic kidney disease']}
    >>> cached_json(d, "demo", {"v": 1}, lambda: {})  # read back, not built again
    {'ckd': ['chronic kidney disease']}
    >>> file_stamp(str(d / "absent.tsv"))[1:]
    [None, None]
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable


def file_stamp(path: str) -> list:
    """A file's identity for a cache key: path, size and modification time (None when absent)."""
    q = Path(path)
    return [path, q.stat().st_size, q.stat().st_mtime_ns] if q.is_file() else [path, None, None]


def cached_json(directory: Path, prefix: str, key: dict, build: Callable[[], Any]) -> Any:
    """``directory/<prefix>-<hash of key>.json`` if it exists, else ``build()`` written there
    atomically. The key names every input (versions, sources, file stamps)."""
    path = directory / f"{prefix}-{hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]}.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    data = build()
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)
    return data
