"""Loader protocol, registry and the problem record used to report bad input.

A loader turns one file into documents. Problems with part of a file (one bad JSON line)
are yielded as :class:`Problem` and the rest of the file is still read; a problem with the
whole file raises :class:`LoadError`. A :class:`Notice` warns about a file that was read but
gave nothing to index (every record skipped by design).

Example::

    >>> from medr2.ingest.loaders.base import get_loader
    >>> get_loader("markdown").name
    'markdown'
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Union

from medr2.config import Config
from medr2.schema import Document


class LoadError(Exception):
    """The whole file cannot be read; the message says why and what to do."""


@dataclass
class Problem:
    """A part of a file that could not be read (the rest of the file still is)."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class Notice(Problem):
    """A warning about a whole file that was read without error but gave nothing to index; a
    consumer that does not know notices treats them as problems."""


LoadItem = Union[Document, Problem]
LoaderFn = Callable[[Path, Config], Iterator[LoadItem]]


@dataclass(frozen=True)
class Loader:
    name: str
    suffixes: tuple[str, ...]
    fn: LoaderFn
    streaming: bool = False  # read record by record (no whole-file size limit)
    description: str = ""

    def load(self, path: Path, config: Config) -> Iterator[LoadItem]:
        return self.fn(path, config)


_REGISTRY: dict[str, Loader] = {}


def register(name: str, suffixes: tuple[str, ...] = (), streaming: bool = False, description: str = ""):
    def deco(fn: LoaderFn) -> LoaderFn:
        _REGISTRY[name] = Loader(name, suffixes, fn, streaming, description or (fn.__doc__ or "").strip().split("\n")[0])
        return fn

    return deco


def loaders() -> dict[str, Loader]:
    from medr2.ingest import loaders as _pkg  # noqa: F401  (imports register every loader)

    return dict(_REGISTRY)


def get_loader(name: str) -> Loader:
    all_ = loaders()
    if name not in all_:
        raise LoadError(f"unknown format {name!r}; choose one of: {', '.join(sorted(all_))}")
    return all_[name]


def read_text_file(path: Path, config: Config) -> str:
    """Read a whole text file as UTF-8 (BOM tolerated), refusing huge, binary or non-UTF-8 files."""
    size = path.stat().st_size
    limit = config.ingest.max_whole_file_mb * 1024 * 1024
    if size == 0:
        raise LoadError("empty file")
    if size > limit:
        raise LoadError(
            f"file is {size / 1e6:.0f} MB, above ingest.max_whole_file_mb="
            f"{config.ingest.max_whole_file_mb}; split it or raise the limit in the config"
        )
    raw = path.read_bytes()
    if b"\x00" in raw[:8192]:
        raise LoadError("binary content (NUL bytes); not a text file — pass --format if it is one")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise LoadError(
            f"not valid UTF-8 (byte {e.start}: {raw[e.start:e.start + 1]!r}); re-encode the file as UTF-8"
        ) from None
    if not text.strip():
        raise LoadError("file holds only whitespace")
    return text


def slug(text: str, limit: int = 40) -> str:
    s = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()
    return s[:limit] or "doc"


def file_doc_id(prefix: str, path: Path, text: str) -> str:
    """Id of a document read from a generic file: name slug plus a hash of its content."""
    return f"{prefix}:{slug(path.stem)}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:10]}"
