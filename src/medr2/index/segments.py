"""Immutable index segments: the vectors and term frequencies of one committed batch.

A segment directory holds ``ids.npy`` (store row ids), the dense vectors (``dense.npy`` for an
exact flat index, ``dense.faiss`` for HNSW), the term-frequency matrix ``tf.npz`` (rows =
passages, columns = terms of ``vocab.json``) and ``dl.npy`` (passage lengths in terms).
Segments are written to a temporary directory and renamed, then listed in the store in the
same transaction as their passages; a directory the store does not list is garbage from a
killed run and is deleted when the index opens. Deleted passages are masked, and merging
segments drops them.

Example::

    >>> import tempfile, pathlib, numpy as np
    >>> from medr2.index.segments import Segment, write_segment
    >>> d = pathlib.Path(tempfile.mkdtemp()) / "seg"
    >>> write_segment(d, np.array([1, 2]), np.eye(2, dtype=np.float32), [["a"], ["b", "b"]], hnsw=False)
    >>> Segment.load(d).dense_search(np.array([0, 1], dtype=np.float32), 1)
    (array([2]), array([1.], dtype=float32))
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Optional

import faiss
import numpy as np
import scipy.sparse as sp


def _tf_matrix(token_lists: list[list[str]]) -> tuple[sp.csc_matrix, list[str], np.ndarray]:
    vocab: dict[str, int] = {}
    rows, cols, vals = [], [], []
    dl = np.zeros(len(token_lists), dtype=np.float32)
    for r, toks in enumerate(token_lists):
        counts: dict[int, int] = {}
        for t in toks:
            c = vocab.setdefault(t, len(vocab))
            counts[c] = counts.get(c, 0) + 1
        dl[r] = len(toks)
        for c, n in counts.items():
            rows.append(r)
            cols.append(c)
            vals.append(n)
    m = sp.csc_matrix((np.asarray(vals, dtype=np.float32), (np.asarray(rows, dtype=np.int64),
                       np.asarray(cols, dtype=np.int64))), shape=(len(token_lists), len(vocab)))
    m.sort_indices()
    return m, list(vocab), dl


def _build_faiss(vectors: np.ndarray, hnsw: bool, m: int = 32, ef_construction: int = 200):
    dim = vectors.shape[1]
    if hnsw:
        index = faiss.IndexHNSWFlat(dim, m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
    else:
        index = faiss.IndexFlatIP(dim)
    if len(vectors):
        index.add(np.ascontiguousarray(vectors, dtype=np.float32))
    return index


def write_segment(
    path: Path, ids: np.ndarray, vectors: np.ndarray, token_lists: list[list[str]], hnsw: bool,
    hnsw_m: int = 32, tf: Optional[tuple[sp.csc_matrix, list[str], np.ndarray]] = None,
    splade: Optional[sp.csr_matrix] = None,
) -> None:
    """Write a segment atomically (temporary directory, fsync, rename)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    np.save(tmp / "ids.npy", np.asarray(ids, dtype=np.int64))
    if hnsw:
        faiss.write_index(_build_faiss(vectors, True, hnsw_m), str(tmp / "dense.faiss"))
    else:
        np.save(tmp / "dense.npy", np.ascontiguousarray(vectors, dtype=np.float32))
    matrix, vocab, dl = tf if tf is not None else _tf_matrix(token_lists)
    sp.save_npz(tmp / "tf.npz", matrix, compressed=False)
    (tmp / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False), encoding="utf-8")
    np.save(tmp / "dl.npy", dl)
    if splade is not None:
        sp.save_npz(tmp / "splade.npz", splade.tocsr(), compressed=False)
    for f in tmp.iterdir():
        with open(f, "rb") as fh:
            os.fsync(fh.fileno())
    os.replace(tmp, path)
    fd = os.open(path.parent, os.O_RDONLY)  # make the rename itself durable
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Segment:
    def __init__(self, path: Path, ids: np.ndarray, index, tf: sp.csc_matrix, vocab: list[str], dl: np.ndarray,
                 splade: Optional[sp.csr_matrix] = None):
        self.path = path
        self.name = path.name
        self.ids = ids
        self.index = index
        self.tf = tf
        self.vocab = vocab
        self.term_col = {t: i for i, t in enumerate(vocab)}
        self.dl = dl
        self.splade = splade
        self.live = np.ones(len(ids), dtype=bool)
        self.is_hnsw = not isinstance(index, faiss.IndexFlat)

    @classmethod
    def load(cls, path: Path, ef_search: int = 128) -> "Segment":
        path = Path(path)
        ids = np.load(path / "ids.npy")
        if (path / "dense.faiss").exists():
            index = faiss.read_index(str(path / "dense.faiss"))
            index.hnsw.efSearch = ef_search
        else:
            index = _build_faiss(np.load(path / "dense.npy"), False)
        tf = sp.load_npz(path / "tf.npz").tocsc()
        vocab = json.loads((path / "vocab.json").read_text(encoding="utf-8"))
        splade = sp.load_npz(path / "splade.npz").tocsr() if (path / "splade.npz").exists() else None
        return cls(path, ids, index, tf, vocab, np.load(path / "dl.npy"), splade)

    def __len__(self) -> int:
        return len(self.ids)

    @property
    def n_live(self) -> int:
        return int(self.live.sum())

    def vectors(self) -> np.ndarray:
        return self.index.reconstruct_n(0, self.index.ntotal) if self.index.ntotal else np.zeros(
            (0, self.index.d), dtype=np.float32)

    def dense_search(self, query: np.ndarray, k: int, mask: Optional[np.ndarray] = None):
        """Top-k (row ids, scores) among rows where ``mask`` (default: live rows) is true."""
        mask = self.live if mask is None else mask
        n_ok = int(mask.sum())
        if n_ok == 0 or k <= 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        k = min(k, n_ok)
        q = np.ascontiguousarray(query.reshape(1, -1), dtype=np.float32)
        if n_ok == len(mask):
            scores, pos = self.index.search(q, k)
        else:
            bits = np.packbits(mask, bitorder="little")
            sel = faiss.IDSelectorBitmap(len(mask), faiss.swig_ptr(bits))
            params = (faiss.SearchParametersHNSW(sel=sel, efSearch=max(self.index.hnsw.efSearch, k))
                      if self.is_hnsw else faiss.SearchParameters(sel=sel))
            scores, pos = self.index.search(q, k, params=params)
        keep = pos[0] >= 0
        return self.ids[pos[0][keep]], scores[0][keep]

    def splade_search(self, query: sp.csr_matrix, k: int, mask: Optional[np.ndarray] = None):
        """Top-k (row ids, dot products) of the SPLADE vectors among rows where mask is true."""
        mask = self.live if mask is None else mask
        if self.splade is None or k <= 0 or not mask.any():
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        scores = np.asarray((self.splade @ query.T).todense()).ravel()
        scores[~mask] = 0.0
        hit = np.nonzero(scores > 0)[0]
        if len(hit) > k:
            hit = hit[np.argpartition(-scores[hit], k - 1)[:k]]
        return self.ids[hit], scores[hit].astype(np.float32)

    def postings(self, term: str, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row positions, term frequencies) of a term among rows where mask is true."""
        col = self.term_col.get(term)
        if col is None:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
        a, b = self.tf.indptr[col], self.tf.indptr[col + 1]
        rows, tfs = self.tf.indices[a:b], self.tf.data[a:b]
        ok = mask[rows]
        return rows[ok].astype(np.int64), tfs[ok]

    def disk_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.path.iterdir())

    def memory_bytes(self) -> int:
        dense = self.index.ntotal * self.index.d * 4
        if self.is_hnsw:
            dense += self.index.ntotal * self.index.hnsw.nb_neighbors(0) * 4 * 2
        sparse = self.tf.data.nbytes + self.tf.indices.nbytes + self.tf.indptr.nbytes
        vocab = sum(len(t) + 60 for t in self.vocab)  # strings + dict entries, approximately
        if self.splade is not None:
            sparse += self.splade.data.nbytes + self.splade.indices.nbytes + self.splade.indptr.nbytes
        return dense + sparse + vocab + self.ids.nbytes + self.dl.nbytes


def merge(segments: list[Segment], path: Path, hnsw: bool, hnsw_m: int = 32) -> int:
    """Write one segment holding the live rows of ``segments``; return its row count."""
    ids, vecs, mats, dls, splades = [], [], [], [], []
    vocab: dict[str, int] = {}
    for seg in segments:
        keep = np.nonzero(seg.live)[0]
        ids.append(seg.ids[keep])
        vecs.append(seg.vectors()[keep])
        dls.append(seg.dl[keep])
        if seg.splade is not None:
            splades.append(seg.splade[keep])
        remap = np.array([vocab.setdefault(t, len(vocab)) for t in seg.vocab], dtype=np.int64)
        coo = seg.tf[keep].tocoo()
        mats.append((coo.row, remap[coo.col] if len(remap) else coo.col, coo.data, len(keep)))
    offset, rows, cols, vals = 0, [], [], []
    for r, c, v, n in mats:
        rows.append(r + offset)
        cols.append(c)
        vals.append(v)
        offset += n
    matrix = sp.csc_matrix(
        (np.concatenate(vals) if vals else np.zeros(0, np.float32),
         (np.concatenate(rows) if rows else np.zeros(0, np.int64), np.concatenate(cols) if cols else np.zeros(0, np.int64))),
        shape=(offset, len(vocab)),
    )
    matrix.sort_indices()
    all_vecs = np.concatenate(vecs) if vecs else np.zeros((0, segments[0].index.d), np.float32)
    if splades and len(splades) != len(segments):
        raise ValueError("cannot merge segments with and without SPLADE vectors")
    write_segment(path, np.concatenate(ids), all_vecs, [], hnsw, hnsw_m,
                  tf=(matrix, list(vocab), np.concatenate(dls).astype(np.float32)),
                  splade=sp.vstack(splades).tocsr() if splades else None)
    return offset
