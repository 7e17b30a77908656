"""File loaders; importing this package registers every one of them."""

from medr2.ingest.loaders import corpora, documents, gbt16751, records, tcmbench  # noqa: F401
