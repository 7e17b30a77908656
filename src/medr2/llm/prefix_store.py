"""KV states of fixed prompt openings kept on disk, so a fresh process (every ``medr2 ask`` from
the shell) does not prefill the instructions and demonstrations that open each prompt again.

A state is the llama.cpp sequence state (``llama_state_seq_get_data``) after evaluating exactly the
opening's tokens; its file name hashes everything the bytes depend on (model file, llama.cpp
version, context and batch sizes, the token ids), so a changed model, build or prompt never loads
a stale state: it simply misses. Writes are atomic (temporary file, then rename); the directory is
kept under ``max_bytes`` by deleting the least recently used states.

Example::

    >>> import tempfile
    >>> from medr2.llm.prefix_store import PrefixStore
    >>> store = PrefixStore(tempfile.mkdtemp(), "model.gguf:1234:0.3.36:4096:512", max_bytes=1 << 20)
    >>> store.get([1, 2, 3]) is None
    True
    >>> store.put([1, 2, 3], b"state-bytes")
    True
    >>> store.get([1, 2, 3]), store.get([1, 2, 4]) is None
    (b'state-bytes', True)
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Optional, Sequence

import numpy as np


class PrefixStore:
    """Disk states keyed by (``identity``, token ids); ``identity`` names what the bytes depend on."""

    def __init__(self, directory, identity: str, max_bytes: int):
        self.dir = Path(directory)
        self.identity = identity
        self.max_bytes = int(max_bytes)

    def _path(self, ids: Sequence[int]) -> Path:
        h = hashlib.sha256(self.identity.encode("utf-8"))
        h.update(np.asarray(ids, dtype=np.int32).tobytes())
        return self.dir / f"{h.hexdigest()[:40]}.kv"

    def get(self, ids: Sequence[int]) -> Optional[bytes]:
        """The stored state of exactly these tokens, or None."""
        p = self._path(ids)
        try:
            data = p.read_bytes()
        except OSError:
            return None
        try:
            os.utime(p)  # least recently used: reading counts as use
        except OSError:
            pass
        return data

    def put(self, ids: Sequence[int], data: bytes) -> bool:
        """Store a state (atomically); False when it could not be written (read-only home, full
        disk): the caller simply prefills again next time."""
        if len(data) > self.max_bytes:
            return False
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write(data)
            os.replace(tmp, self._path(ids))
            self._trim()
            return True
        except OSError:
            return False

    def _trim(self) -> None:
        files = []
        for p in self.dir.glob("*.kv"):
            try:
                st = p.stat()
            except OSError:
                continue
            files.append((st.st_mtime, st.st_size, p))
        total = sum(s for _, s, _ in files)
        for _, size, p in sorted(files):
            if total <= self.max_bytes:
                break
            try:
                p.unlink()
                total -= size
            except OSError:
                pass
