"""Copy an embedded index to Milvus without re-embedding.

The source directory is only read. The new index directory gets a copy of the store (SQLite
backup, a consistent snapshot even while the source is being read), a ``backend.json`` naming
the Milvus target, and the collection filled from the segments: the stored dense vectors, the
BM25 terms rebuilt from each segment's term frequencies (the same tokens the embedded index
scores), the SPLADE vectors when the index has them, and the filter metadata from the store.
Only live rows travel; rows of removed documents still in a segment are left behind.

Example::

    >>> import numpy as np, scipy.sparse as sp
    >>> from medr2.index.migrate import migrate_to_milvus, segment_terms
    >>> segment_terms(sp.csr_matrix(np.array([[2.0, 0.0], [0.0, 1.0]])), ["metformin", "diabet"], np.arange(2))
    [['metformin', 'metformin'], ['diabet']]
    >>> migrate_to_milvus(Path("idx"), "milvus-lite:/data/idx.db", Path("idx-milvus"))  # doctest: +SKIP
    170
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import numpy as np

from medr2.config import IndexConfig
from medr2.index.milvus import encode_terms
from medr2.store.layout import BackendError, is_default, new_spec, read_spec, write_spec
from medr2.store.uri import milvus_uri


def segment_terms(tf, vocab: list[str], positions: np.ndarray) -> list[list[str]]:
    """The bag of terms of each row of a segment's term-frequency matrix (CSR, rows = passages):
    a term repeated as often as it occurs."""
    out = []
    for p in positions:
        a, b = tf.indptr[p], tf.indptr[p + 1]
        terms: list[str] = []
        for col, n in zip(tf.indices[a:b], tf.data[a:b]):
            terms.extend([vocab[col]] * int(round(float(n))))
        out.append(terms)
    return out


def migrate_to_milvus(src: Path, target: str, out: Path, progress: bool = False, batch: int = 2_000) -> int:
    from medr2.index.index import Index

    if not is_default(read_spec(src)):
        raise BackendError(f"{src} is not an embedded index (it has {src / 'backend.json'}); migrate from one")
    if not (src / "store.sqlite").exists():
        raise BackendError(f"no medr2 index at {src}")
    if out.exists() and any(out.iterdir()):
        raise BackendError(f"{out} exists and is not empty; give a new directory with --out")
    out.mkdir(parents=True, exist_ok=True)
    ok = False
    try:
        with Index.open(src) as source:
            spec = new_spec(IndexConfig(backend="milvus", uri=milvus_uri(target)), out)
            write_spec(out, spec)
            a = sqlite3.connect(str(src / "store.sqlite"))
            b = sqlite3.connect(str(out / "store.sqlite"))
            with b:
                a.backup(b)
            a.close()
            b.close()
            with Index.open(out, writable=True) as dest:
                with dest.store.transaction():
                    dest.store.remove_segments(dest.store.segments())
                n = _copy(source, dest, progress, batch)
                if dest.mv.count() != n:
                    raise BackendError(f"Milvus holds {dest.mv.count()} rows after copying {n}; run the "
                                       "migration again")
        ok = True
        return n
    finally:
        if not ok:
            shutil.rmtree(out, ignore_errors=True)


def _copy(source, dest, progress: bool, batch: int) -> int:
    from tqdm import tqdm

    total = sum(s.n_live for s in source.segments)
    bar = tqdm(total=total, unit="passage", desc="migrate", disable=not progress)
    n = 0
    for seg in source.segments:
        live = np.nonzero(seg.live)[0]
        vectors = seg.vectors()
        tf = seg.tf.tocsr()  # once per segment: rows are read batch by batch
        for a in range(0, len(live), batch):
            pos = live[a:a + batch]
            ids = seg.ids[pos]
            meta = source.store.passages(ids.tolist())
            keep = np.array([int(i) in meta for i in ids], dtype=bool)
            pos, ids = pos[keep], ids[keep]
            if not len(ids):
                continue
            terms = [encode_terms(t) for t in segment_terms(tf, seg.vocab, pos)]
            splade = seg.splade[pos] if seg.splade is not None else None
            rows = [(meta[int(i)]["source_type"], meta[int(i)]["language"], meta[int(i)]["year"]) for i in ids]
            dest.mv.upsert(ids, vectors[pos], terms, splade, rows)
            n += len(ids)
            bar.update(len(ids))
    bar.close()
    return n
