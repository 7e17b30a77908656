"""Connection URIs of the server engines: what may be written to disk, what may be shown, and
the Milvus forms users write.

* :func:`strip_password` drops a password from a URI (what ``backend.json`` keeps: secrets come
  from ``PGPASSWORD`` / ``~/.pgpass`` or a token variable, never from the index directory);
* :func:`redact_uri` masks it (what messages show), in a URI or a libpq ``key=value`` string;
* :func:`milvus_uri` turns ``milvus://host:port`` into the ``http://`` URI pymilvus wants and
  ``milvus-lite:PATH`` into the path of a Milvus Lite file.

Example::

    >>> from medr2.store.uri import milvus_uri, redact_uri, strip_password
    >>> strip_password("postgresql://medr2:secret@db.example:5432/medr2")
    'postgresql://medr2@db.example:5432/medr2'
    >>> redact_uri("postgresql://medr2:secret@db.example:5432/medr2")
    'postgresql://medr2:***@db.example:5432/medr2'
    >>> milvus_uri("milvus://vectors:19530"), milvus_uri("milvus-lite:idx.db")
    ('http://vectors:19530', 'idx.db')
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit


def strip_password(uri: str) -> str:
    """The URI without its password (what may be written to disk or shown)."""
    parts = urlsplit(uri)
    if parts.password is None:
        return uri
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    user = parts.username or ""
    return urlunsplit((parts.scheme, f"{user}@{host}" if user else host, parts.path, parts.query, parts.fragment))


def redact_uri(uri: str) -> str:
    """The URI (or key=value connection string) with its password replaced by ``***``.

    >>> redact_uri("postgresql:///db?host=/tmp/s&password=x&user=u")
    'postgresql:///db?host=/tmp/s&password=***&user=u'
    """
    out = re.sub(r"^(postgres(?:ql)?://[^:/@?]*):[^@/?]*@", r"\1:***@", uri)
    out = re.sub(r"([?&]password=)[^&]*", r"\1***", out)
    return re.sub(r"(^|\s)password\s*=\s*('(?:[^'\\]|\\.)*'|\S+)", r"\1password=***", out)


def milvus_uri(uri: str) -> str:
    """Normalise what users write: ``milvus://host:port`` -> ``http://host:port``; paths stay."""
    if uri.startswith("milvus://"):
        return "http://" + uri[len("milvus://"):]
    if uri.startswith("milvus-lite:"):
        return uri[len("milvus-lite:"):]
    return uri
