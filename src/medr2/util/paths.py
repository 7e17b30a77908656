"""Where medr2 keeps its files: ``$MEDR2_HOME`` (default ``~/.cache/medr2``), read at each call.

Example::

    >>> import os
    >>> saved = os.environ.pop("MEDR2_HOME", None)
    >>> medr2_home().parts[-2:]
    ('.cache', 'medr2')
    >>> os.environ["MEDR2_HOME"] = "/srv/medr2"; str(medr2_home())
    '/srv/medr2'
    >>> if saved is None: del os.environ["MEDR2_HOME"]
    ... else: os.environ["MEDR2_HOME"] = saved
"""

from __future__ import annotations

import os
from pathlib import Path


def medr2_home() -> Path:
    return Path(os.environ.get("MEDR2_HOME") or Path.home() / ".cache" / "medr2")
