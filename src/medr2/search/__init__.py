"""Search: hybrid dense + sparse retrieval with fusion and filters."""
