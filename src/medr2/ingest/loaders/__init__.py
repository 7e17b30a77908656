"""File loaders; importing this package registers every one of them."""

from medr2.ingest.loaders import corpora, documents, records  # noqa: F401
