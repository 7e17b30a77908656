"""Model files that ship inside the package (``medr2/models/...``) or that a user names.

Example::

    >>> from medr2.util.shipped import model_file
    >>> with model_file("", ("doc_type", "doc_type.npz"), "document-type model", "rebuild it") as p:
    ...     p.name
    'doc_type.npz'
"""

from __future__ import annotations

from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import Iterator, Sequence


@contextmanager
def model_file(path: str | Path, shipped: Sequence[str], what: str, rebuild: str, otherwise: str = ""
               ) -> Iterator[Path]:
    """The file at ``path``, or (``path`` empty) the one shipped under ``medr2.models`` at
    ``shipped``; a missing file raises FileNotFoundError naming it, how to ``rebuild`` it and,
    for the shipped one, the setting that does without it (``otherwise``)."""
    if path:
        p = Path(path)
        if not p.is_file():
            raise FileNotFoundError(f"{what} {p} does not exist; {rebuild}")
        yield p
        return
    res = resources.files("medr2.models").joinpath(*shipped)
    if not res.is_file():
        alt = f", or {otherwise}" if otherwise else ""
        raise FileNotFoundError(f"the shipped {what} (medr2/models/{'/'.join(shipped)}) is missing from this "
                                f"installation; {rebuild}{alt}")
    with resources.as_file(res) as p:
        yield p
