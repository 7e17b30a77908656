"""Index: passages and metadata in SQLite, dense (FAISS) and sparse (BM25) segments on disk."""
