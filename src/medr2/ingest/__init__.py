"""Ingestion: load sources into :class:`medr2.schema.Document`, normalise, segment into passages."""
