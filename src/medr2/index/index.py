"""The index: one directory, embedded, no server.

Layout (:mod:`medr2.store.layout`)::

    DIR/store.sqlite      documents, passages (TextIDs), files, live segment list, config
    DIR/segments/NAME/    immutable dense + sparse segments (see medr2.index.segments)
    DIR/.lock             held by the one writer

Adding documents writes a new segment and commits it with its passages in one store
transaction; nothing already stored is rewritten, and segments are merged in size tiers (four
of a tier become one) so that search touches few of them. Removing a document deletes its
passages from the store; its rows in the segments are masked at once and dropped at the next
merge. Below ``dense.hnsw_threshold`` vectors a segment is an exact flat FAISS index, at or
above it an HNSW graph.

Example::

    >>> import tempfile, pathlib
    >>> from medr2.index.index import Index
    >>> idx = Index.open(pathlib.Path(tempfile.mkdtemp()) / "index", create=True)
    >>> idx.stats()["documents"], idx.stats()["segments"]
    (0, [])
    >>> idx.close()
"""

from __future__ import annotations

import fcntl
import json
import math
import shutil
import sqlite3
import time
import uuid
from pathlib import Path
from typing import Callable, Iterable, Optional

import numpy as np

from medr2.config import Config
from medr2.index.backend import index_class, open_store
from medr2.index.batch import Encoded, PendingDoc, batch_texts
from medr2.index.dense import DenseEncoder, load_encoder
from medr2.index.segments import Segment, merge, write_segment
from medr2.index.sparse import Tokenizer, bm25_idf, score_segment
from medr2.index.store import SQLiteStore
from medr2.locks import try_lock
from medr2.schema import Passage
from medr2.store.layout import STORE_FILE, BackendError, check_agrees, is_default, new_spec, read_spec, write_spec

# Settings an existing index is bound to: changing them needs a new index.
_BOUND = {"dense": ("model", "passage_prefix"),
          "sparse": ("stemmer", "stopwords", "splade_model", "jieba_user_dicts"),
          "segment": None}


class IndexError_(BackendError):
    """An index that cannot be opened or written; the message says why and what to do."""


class Index:
    def __init__(self, path: Path, config: Config, store: SQLiteStore, writable: bool, lock_fh=None,
                 backend_spec: Optional[dict] = None):
        self.path = path
        self.backend_spec = backend_spec or {}
        self.config = config
        self.store = store
        self.writable = writable
        self._lock_fh = lock_fh
        self._encoder: Optional[DenseEncoder] = None
        self._splade = None
        self.tokenizer = Tokenizer(config.sparse)
        self.segments: list[Segment] = []
        self._load_segments()

    # opening ------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, config: Optional[Config] = None, create: bool = False,
             writable: bool = False) -> "Index":
        """Open (or with ``create`` make) the index in ``path``; ``DIR/backend.json`` says which
        engines it runs on (see medr2.store.layout), the embedded ones when absent."""
        path = Path(path)
        db = path / STORE_FILE
        spec = read_spec(path) if path.is_dir() else {}
        store_uri = None
        if not db.exists() and not spec:
            if not create:
                raise IndexError_(f"no medr2 index at {path}; build one with `medr2 ingest PATH --index {path}`")
            if path.exists() and any(path.iterdir()):
                raise IndexError_(f"{path} exists and is not a medr2 index; choose an empty or new directory")
            path.mkdir(parents=True, exist_ok=True)
            spec = new_spec((config or Config()).index, path)
            if not is_default(spec):
                write_spec(path, spec)
                store_uri = (config or Config()).index.store_uri or None
        elif config is not None:
            check_agrees(spec, config.index, path)
        lock_fh = None
        if writable or create:
            lock_fh = try_lock(path / ".lock")
            if lock_fh is None:
                raise IndexError_(f"index {path} is being written by another process; wait for it to finish")
        store = None
        try:
            store = open_store(spec, path, store_uri)
            stored = store.get_meta("config")
            if stored is None:
                config = config or Config()
                with store.transaction():
                    store.set_meta("config", config.model_dump_json())
                    store.set_meta("created", str(time.time()))
            else:
                saved = saved_config(stored)
                config = _bind(saved, config or Config(), path)
            klass = index_class(spec) or cls
            return klass(path, config, store, writable or create, lock_fh, spec)
        except BaseException as e:
            if store is not None:
                store.close()
            if lock_fh is not None:
                lock_fh.close()
            if isinstance(e, (sqlite3.DatabaseError, ValueError, KeyError, OSError)) and not isinstance(e, IndexError_):
                raise IndexError_(f"cannot open index {path}: {type(e).__name__}: {e}") from None
            raise

    def close(self) -> None:
        self.store.close()
        if self._lock_fh:
            fcntl.flock(self._lock_fh, fcntl.LOCK_UN)
            self._lock_fh.close()
            self._lock_fh = None

    def __enter__(self) -> "Index":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @property
    def seg_dir(self) -> Path:
        return self.path / "segments"

    def _load_segments(self) -> None:
        self.seg_dir.mkdir(exist_ok=True)
        for attempt in range(5):
            listed = self.store.segments()
            if self.writable:  # garbage of a killed run: segments written but never committed
                for p in self.seg_dir.iterdir():
                    if p.name not in listed:
                        shutil.rmtree(p, ignore_errors=True)
            try:
                self.segments = [Segment.load(self.seg_dir / n, self.config.dense.hnsw_ef_search) for n in listed]
                break
            except FileNotFoundError:
                if attempt == 4:
                    missing = [n for n in listed if not (self.seg_dir / n).exists()]
                    raise IndexError_(f"index {self.path} lacks segment files {missing[:3]}; "
                                      "rebuild it with `medr2 ingest`") from None
                time.sleep(0.2)  # a writer merged segments while we read the list: read it again
        self._refresh_live()

    def _refresh_live(self) -> None:
        live = self.store.live_rowids()
        for seg in self.segments:
            seg.live = np.isin(seg.ids, live)
        self._stats_cache()

    def _stats_cache(self) -> None:
        """Recompute what derives from the live rows; every change of them ends here."""
        self._filter_masks: Optional[tuple[np.ndarray, list[np.ndarray]]] = None
        self.n_live = sum(s.n_live for s in self.segments)
        total = sum(float(s.dl[s.live].sum()) for s in self.segments)
        self.avg_len = total / self.n_live if self.n_live else 1.0

    @property
    def encoder(self) -> DenseEncoder:
        if self._encoder is None:
            self._encoder = load_encoder(self.config.dense)
            dim = self.store.get_meta("dense_dim")
            if dim is not None and int(dim) != self._encoder.dim:
                raise IndexError_(f"index {self.path} holds {dim}-d vectors but the model gives {self._encoder.dim}-d")
        return self._encoder

    @property
    def splade(self):
        """The SPLADE encoder when sparse.splade_model is set, else None."""
        if self._splade is None and self.config.sparse.splade_model:
            from medr2.index.splade import SpladeEncoder

            self._splade = SpladeEncoder(self.config.sparse.splade_model, self.config.dense.device)
        return self._splade

    # writing ------------------------------------------------------------------------------
    def encode(self, texts: list[str], languages: list[str]) -> Encoded:
        """Embed and tokenise passage texts (``batch_texts``) with this index's models."""
        return Encoded(self.encoder.encode_passages(texts),
                       [self.tokenizer.tokens(t, lang) for t, lang in zip(texts, languages)],
                       self.splade.encode(texts) if self.splade is not None else None)

    def commit(self, docs: list[PendingDoc], removals: Iterable[str] = (),
               in_transaction: Optional[Callable[[SQLiteStore], None]] = None,
               encoded: Optional[Encoded] = None) -> int:
        """Embed and tokenise ``docs`` (unless ``encoded`` already holds that, from
        ``encode(*batch_texts(docs))``), write their rows and commit them with the store rows.

        ``removals`` are doc ids deleted in the same transaction; ``in_transaction`` may add
        more store writes (file bookkeeping) to it. Returns the number of passages added.
        """
        self._require_writable()
        removals = set(removals)
        replaced = {d.doc.doc_id for d in docs if d.replaces} - removals
        passages = [(d, p) for d in docs for p in d.passages]
        name = None
        if passages:
            start = self.store.next_rowid()
            ids = np.arange(start, start + len(passages), dtype=np.int64)
            texts, languages = batch_texts(docs)
            enc = encoded if encoded is not None else self.encode(texts, languages)
            if len(enc.tokens) != len(texts):
                raise IndexError_(f"{len(enc.tokens)} encoded passages for a batch of {len(texts)}")
            rows = [(p, d.doc.source_type.value, d.doc.meta.year) for d, p in passages]
            name = self._write_rows(ids, enc.vectors, texts, enc.tokens, enc.splade, rows)
        try:
            with self.store.transaction():
                removed = self.store.delete_documents(removals) if removals else []
                removed += self.store.delete_documents(replaced, keep_links=True) if replaced else []
                for d in docs:
                    self.store.put_document(d.doc, d.content_hash, len(d.passages))
                if passages:
                    self.store.put_passages([(int(i), p, st, year) for i, (p, st, year) in zip(ids, rows)])
                    if name:
                        self.store.add_segment(name, len(passages), "flat")
                    if self.store.get_meta("dense_dim") is None:
                        self.store.set_meta("dense_dim", str(self.encoder.dim))
                if removed:
                    self._removing(removed)
                if in_transaction:
                    in_transaction(self.store)
        except BaseException:
            if passages:
                self._discard_rows(name, ids)
            raise
        if name:
            self.segments.append(Segment.load(self.seg_dir / name, self.config.dense.hnsw_ef_search))
        if removed:
            self._mask(removed)
        self._stats_cache()
        self.maybe_merge()
        return len(passages)

    def _write_rows(self, ids: np.ndarray, vectors: np.ndarray, texts: list[str], tokens: list[list[str]], splade,
                    rows: list[tuple[Passage, str, Optional[int]]]) -> Optional[str]:
        """Write the vectors and terms of new passages before the store commits them; return
        the name of the segment to register with them (None when the backend keeps no list)."""
        name = f"s{time.time_ns():x}-{uuid.uuid4().hex[:6]}"
        write_segment(self.seg_dir / name, ids, vectors, tokens, hnsw=len(ids) >= self.config.dense.hnsw_threshold,
                      hnsw_m=self.config.dense.hnsw_m, splade=splade)
        return name

    def _discard_rows(self, name: Optional[str], ids: np.ndarray) -> None:
        """Undo ``_write_rows`` after the store transaction failed."""
        if name and name not in self.store.segments():  # never delete a committed segment
            shutil.rmtree(self.seg_dir / name, ignore_errors=True)

    def _removing(self, rowids: list[int]) -> None:
        """Called inside the store transaction that deletes passages (a backend may note them)."""

    def remove_documents(self, doc_ids: Iterable[str]) -> int:
        self._require_writable()
        with self.store.transaction():
            removed = self.store.delete_documents(list(doc_ids))
            if removed:
                self._removing(removed)
        self._mask(removed)
        self._stats_cache()
        self.maybe_merge()
        return len(removed)

    def _mask(self, rowids: list[int]) -> None:
        gone = np.asarray(rowids, dtype=np.int64)
        for seg in self.segments:
            seg.live &= ~np.isin(seg.ids, gone)

    def _require_writable(self) -> None:
        if not self.writable:
            raise IndexError_("index opened read-only")

    def maybe_merge(self) -> None:
        """Size-tiered merging: four segments of one tier become one; mostly-deleted ones are rewritten."""
        base = max(self.config.ingest.batch_passages, 1)
        while True:
            tiers: dict[int, list[Segment]] = {}
            for s in self.segments:
                tiers.setdefault(int(math.log(max(s.n_live, 1) / base + 1, 4)), []).append(s)
            group = next((g for g in tiers.values() if len(g) >= 4), None)
            if group is None and len(self.segments) > self.config.sparse.max_segments * 2:
                group = sorted(self.segments, key=lambda s: s.n_live)[:4]
            if group is None:
                group = [s for s in self.segments if len(s) and s.n_live < 0.7 * len(s)][:1]
                group = group or None
            if group is None:
                return
            self._merge(group)

    def _merge(self, group: list[Segment]) -> None:
        name = f"m{time.time_ns():x}-{uuid.uuid4().hex[:6]}"
        n = sum(s.n_live for s in group)
        hnsw = n >= self.config.dense.hnsw_threshold
        if n:
            merge(group, self.seg_dir / name, hnsw, self.config.dense.hnsw_m)
        with self.store.transaction():
            self.store.remove_segments([s.name for s in group])
            if n:
                self.store.add_segment(name, n, "hnsw" if hnsw else "flat")
        for s in group:
            shutil.rmtree(s.path, ignore_errors=True)
        self.segments = [s for s in self.segments if s not in group]
        if n:  # the merged segment holds exactly the live rows of the group
            self.segments.append(Segment.load(self.seg_dir / name, self.config.dense.hnsw_ef_search))
        self._stats_cache()

    # reading ------------------------------------------------------------------------------
    def allowed(self, source_types=None, year_min=None, year_max=None, languages=None):
        """What the search methods take as ``allowed`` for a metadata filter (here the row ids
        the store selects; a server backend may return its own filter expression)."""
        return self.store.filter_rowids(source_types, year_min, year_max, languages)

    def _masks(self, allowed: Optional[np.ndarray]) -> list[np.ndarray]:
        """Per-segment row masks (live and allowed); one filtered query's retrievers share them."""
        if allowed is None:
            return [s.live for s in self.segments]
        if self._filter_masks is None or self._filter_masks[0] is not allowed:
            self._filter_masks = (allowed, [s.live & np.isin(s.ids, allowed) for s in self.segments])
        return self._filter_masks[1]

    def _top_k(self, search: Callable, k: int, allowed: Optional[np.ndarray]) -> list[tuple[int, float]]:
        """Run ``search(segment, k, mask)`` on every segment and keep the best k (row id, score)."""
        found: list[tuple[int, float]] = []
        for seg, mask in zip(self.segments, self._masks(allowed)):
            ids, scores = search(seg, k, mask)
            found.extend(zip(ids.tolist(), scores.tolist()))
        found.sort(key=lambda x: -x[1])
        return found[:k]

    def vectors_for(self, rowids: list[int]) -> np.ndarray:
        """The stored dense vectors of live passages, in the order asked (no re-encoding)."""
        dim = int(self.store.get_meta("dense_dim") or 0) or (self.segments[0].index.d if self.segments else 0)
        out = np.zeros((len(rowids), dim), dtype=np.float32)
        want = {int(r): i for i, r in enumerate(rowids)}
        missing = set(want)
        for seg in self.segments:
            if not missing:
                break
            pos = np.nonzero(np.isin(seg.ids, np.fromiter(missing, dtype=seg.ids.dtype)) & seg.live)[0]
            for p in pos:
                r = int(seg.ids[p])
                out[want[r]] = seg.index.reconstruct(int(p))
                missing.discard(r)
        if missing:
            raise IndexError_(f"no stored vector for {len(missing)} passage(s) (removed since they were found)")
        return out

    def search_dense(self, query_vec: np.ndarray, k: int, allowed: Optional[np.ndarray] = None) -> list[tuple[int, float]]:
        return self._top_k(lambda seg, k, mask: seg.dense_search(query_vec, k, mask), k, allowed)

    def search_splade(self, text: str, k: int, allowed: Optional[np.ndarray] = None) -> list[tuple[int, float]]:
        if self.splade is None:
            return []
        q = self.splade.encode([text])
        return self._top_k(lambda seg, k, mask: seg.splade_search(q, k, mask), k, allowed)

    def search_sparse(self, terms: list[str], k: int, allowed: Optional[np.ndarray] = None,
                      text: Optional[str] = None) -> list[tuple[int, float]]:
        """BM25 over the query's terms (``text``, the raw query, serves backends with their own analyzers)."""
        terms = list(dict.fromkeys(terms))
        if not terms or not self.n_live:
            return []
        cfg = self.config.sparse
        masks = self._masks(allowed)
        # postings over live passages: global document frequencies come from all of them,
        # scores only go to the passages the filter allows
        postings = [[seg.postings(t, seg.live) for t in terms] for seg in self.segments]
        df = np.array([sum(len(p[j][0]) for p in postings) for j in range(len(terms))], dtype=np.float64)
        idf = bm25_idf(df, self.n_live)
        found: list[tuple[int, float]] = []
        for seg, mask, cols in zip(self.segments, masks, postings):
            if allowed is not None:
                cols = [(rows[mask[rows]], tfs[mask[rows]]) for rows, tfs in cols]
            if not any(len(r) for r, _ in cols):
                continue
            scores = score_segment(cols, idf, seg.dl, self.avg_len, cfg.k1, cfg.b, len(seg))
            hit = np.nonzero(scores > 0)[0]
            if len(hit) > k:
                hit = hit[np.argpartition(-scores[hit], k - 1)[:k]]
            found.extend(zip(seg.ids[hit].tolist(), scores[hit].tolist()))
        found.sort(key=lambda x: -x[1])
        return found[:k]

    def stats(self) -> dict:
        counts = self.store.counts()
        disk = {"store": sum(f.stat().st_size for f in self.path.glob("store.sqlite*")),
                "segments": sum(s.disk_bytes() for s in self.segments)}
        counts.update({
            "index_dir": str(self.path),
            "segments": [{"name": s.name, "rows": len(s), "live": s.n_live, "kind": "hnsw" if s.is_hnsw else "flat"}
                         for s in self.segments],
            "dense_model": self.config.dense.model,
            "dense_dim": int(self.store.get_meta("dense_dim") or 0),
            "splade_model": self.config.sparse.splade_model or None,
            "vocabulary_terms": sum(len(s.vocab) for s in self.segments),
            "disk_bytes": disk | {"total": sum(disk.values())},
            "memory_bytes": sum(s.memory_bytes() for s in self.segments),
        })
        return counts


def saved_config(stored: str) -> Config:
    """The config stored in an index, read leniently: settings later versions dropped or
    tightened fall back to defaults (only the settings bound to the index matter here)."""
    data = json.loads(stored)
    sections = {}
    for name, f in Config.model_fields.items():
        raw = data.get(name)
        if not isinstance(raw, dict):
            continue
        model = f.annotation
        try:
            sections[name] = model.model_validate({k: v for k, v in raw.items() if k in model.model_fields})
        except ValueError:
            if name in _BOUND:
                raise
    return Config(**sections)


def _bind(saved: Config, wanted: Config, path: Path) -> Config:
    """The config to use on an existing index: the index's own value of every setting it is bound
    to (a setting the user gave explicitly must agree), the user's value of everything else."""
    out = wanted.model_copy(deep=True)
    for section, keys in _BOUND.items():
        a, b = getattr(saved, section), getattr(out, section)
        for key in keys or type(a).model_fields:
            if key in b.model_fields_set and getattr(a, key) != getattr(b, key):
                raise IndexError_(
                    f"index {path} was built with {section}.{key}={getattr(a, key)!r}, the config asks "
                    f"{getattr(b, key)!r}; use the same setting or build a new index"
                )
            setattr(b, key, getattr(a, key))
    return out

