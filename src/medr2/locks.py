"""Advisory file locks between processes (``flock``): one writer per index, one per evaluation run.

A lock lives as long as the returned file handle stays open (closing it, or the process ending,
releases it), so a killed process never leaves a stale lock behind. The lock file itself stays;
it holds no data.

Example::

    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / ".lock"
    >>> a = try_lock(p)
    >>> a is not None, try_lock(p) is None       # a second exclusive holder is refused
    (True, True)
    >>> a.close()
    >>> r1, r2 = try_lock(p, shared=True), try_lock(p, shared=True)
    >>> r1 is not None and r2 is not None, try_lock(p) is None  # holders share; an exclusive one is refused
    (True, True)
    >>> r1.close(); r2.close()
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO, Optional


def try_lock(path: Path, shared: bool = False) -> Optional[IO]:
    """Take the lock on ``path`` without waiting: the open handle that holds it, or None when
    another process (or another handle of this one) holds it in a conflicting mode. Exclusive
    by default; ``shared=True`` lets other shared holders in and keeps exclusive ones out."""
    fh = open(path, "a")
    try:
        fcntl.flock(fh, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        fh.close()
        return None
    return fh
