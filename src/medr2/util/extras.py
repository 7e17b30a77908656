"""Optional dependencies (the extras of ``pip install 'medr2[EXTRA]'``): import one, or fail with
a message that names the extra to install.

The extras (see ``[project.optional-dependencies]`` in pyproject.toml and docs/install.md):
``serve`` (FastAPI, uvicorn, python-multipart), ``milvus`` (pymilvus, milvus-lite), ``postgres``
(psycopg), ``report`` (matplotlib), ``train`` (scikit-learn), ``mcp`` (the MCP SDK). :class:`MissingExtra` is an
ImportError, so ``except ImportError`` handlers keep catching it; the command line prints its
message as an error (exit code 1), without a traceback.

Example::

    >>> from medr2.util.extras import MissingExtra, errors_of, require
    >>> require("json", "serve", "medr2 serve").__name__
    'json'
    >>> try:
    ...     require("medr2_no_such_module", "report", "medr2 eval report's plots")
    ... except MissingExtra as e:
    ...     print(str(e).split(" (")[0], e.extra, isinstance(e, ImportError))
    medr2 eval report's plots needs the 'report' extra: pip install 'medr2[report]' report True
    >>> errors_of("json", "JSONDecodeError")[0].__name__, errors_of("medr2_no_such_module", "Error")
    ('JSONDecodeError', ())
"""

from __future__ import annotations

import importlib
from types import ModuleType


class MissingExtra(ImportError):
    """A module of an optional dependency cannot be imported; ``extra`` names the medr2 extra
    that installs it."""

    def __init__(self, msg: str, extra: str, name: str):
        super().__init__(msg, name=name)
        self.extra = extra


def install_hint(extra: str) -> str:
    """The command that installs ``extra``, e.g. ``pip install 'medr2[serve]'``."""
    return f"pip install 'medr2[{extra}]'"


def require(module: str, extra: str, what: str) -> ModuleType:
    """The imported ``module``; when it cannot be imported, :class:`MissingExtra` saying that
    ``what`` (a command or setting, e.g. "medr2 serve") needs ``extra`` and how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise MissingExtra(f"{what} needs the '{extra}' extra: {install_hint(extra)} ({e})", extra, module) from e


def errors_of(module: str, *names: str) -> tuple[type[BaseException], ...]:
    """The exception classes ``names`` of an optional ``module``, or ``()`` when it is not
    installed (nothing can raise them then): for ``except`` clauses that list them."""
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return ()
    return tuple(getattr(mod, n) for n in names)
