"""Milvus backend for passages' vectors and terms: Milvus Lite (a file) or a Milvus server.

One collection per index holds, per passage row id: the dense vector, the BM25 terms (Milvus
computes the BM25 sparse vector with its built-in BM25 function), the optional learned sparse
(SPLADE) vector, and the metadata filters use (source type, year, language). Documents, passage
texts and TextIDs stay in the index's store (SQLite or PostgreSQL), so search results, the
Med-R2 pipeline and the knowledge graph read passages as with the embedded index.

BM25 terms: with ``index.analyzer = "medr2"`` (the default) Milvus indexes medr2's own tokens
(Snowball-stemmed English without stopwords, jieba words for Chinese), written as ASCII words
its standard tokenizer keeps whole, so its BM25 ranking equals the embedded index's (the
tests compare them). ``"english"`` and ``"chinese"`` use Milvus's analyzers on the raw text
instead (standard tokenizer with lower-casing, English stemming and stopwords; jieba).

Writes are ordered so that a killed run leaves nothing visible: rows are upserted into Milvus
before the store commits their passages (an uncommitted row id is above the store's highest
and is deleted when the index is next opened for writing), and removed row ids are recorded
in the store's transaction before they are deleted from Milvus (a pending list replayed on
the next writable open).

Example::

    >>> from medr2.index.milvus import encode_terms
    >>> encode_terms(["metformin", "diabet", "糖尿病"])
    'metformin diabet zxe7b396e5b0bfe79785'
"""

from __future__ import annotations

import json
import logging
import os
import re
from typing import Any, Iterable, Optional

import numpy as np

from medr2.index.index import Index, IndexError_
from medr2.store.layout import BackendError, client_uri, lite_path

_PLAIN = re.compile(r"^[a-z0-9]+$")
_MAX_TERMS_BYTES = 60_000  # VARCHAR limit is 65,535 bytes
_BATCH = 2_000
_ANALYZERS = {
    "medr2": {"tokenizer": "standard"},
    "english": {"tokenizer": "standard",
                "filter": ["lowercase", {"type": "stemmer", "language": "english"},
                           {"type": "stop", "stop_words": ["_english_"]}]},
    "chinese": {"tokenizer": "jieba", "filter": ["lowercase"]},
}
PENDING = "milvus_pending_delete"
# Rows Milvus holds in growing (unindexed) segments are searched by brute force, slowly in Milvus
# Lite (0.8 s a dense query over 10k such rows, 35 ms once flushed): flush after this many rows
# and when a writer closes the index.
FLUSH_ROWS = 10_000


def encode_terms(tokens: Iterable[str]) -> str:
    """medr2 tokens as ASCII words: plain [a-z0-9] words stay, any other token (Chinese words,
    accented or underscored ones, and words that look like an encoding) becomes ``zx`` + hex."""
    out = []
    for t in tokens:
        if _PLAIN.match(t) and not t.startswith("zx"):
            out.append(t)
        else:
            out.append("zx" + t.encode("utf-8").hex())
    return _fit(" ".join(out))


def _fit(text: str) -> str:
    b = text.encode("utf-8")
    if len(b) <= _MAX_TERMS_BYTES:
        return text
    return b[:_MAX_TERMS_BYTES].decode("utf-8", "ignore").rsplit(" ", 1)[0]


def filter_expr(source_types=None, year_min=None, year_max=None, languages=None) -> str:
    """A Milvus boolean expression for the metadata filters ('' for none)."""
    parts = []
    if source_types:
        parts.append(f"source_type in {json.dumps(list(source_types))}")
    if languages:
        parts.append(f"language in {json.dumps(list(languages))}")
    if year_min is not None:
        parts.append(f"year >= {int(year_min)}")
    if year_max is not None:
        parts.append(f"year <= {int(year_max)}")
    return " and ".join(parts)


class MilvusVectors:
    """The collection of one index; every method is one or a few Milvus requests."""

    def __init__(self, uri: str, collection: str, analyzer: str = "medr2", dense_index: str = "FLAT",
                 dense_params: Optional[dict] = None, search_params: Optional[dict] = None,
                 token: Optional[str] = None, k1: float = 1.5, b: float = 0.75):
        from medr2.util.extras import MissingExtra, require

        try:
            what = 'the Milvus backend (index.backend = "milvus")'
            MilvusClient = require("pymilvus", "milvus", what).MilvusClient  # noqa: N806 - the class
            if not uri.startswith(("http://", "https://")):  # a Lite file: pymilvus starts milvus-lite
                require("milvus_lite", "milvus", what)
        except MissingExtra as e:
            raise BackendError(str(e)) from None
        logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
        self.uri, self.name, self.analyzer = uri, collection, analyzer
        self.dense_index, self.dense_params = dense_index, dict(dense_params or {})
        self.search_params = dict(search_params or {})
        self.k1, self.b = k1, b
        try:
            self.client = MilvusClient(uri, token=token or "")
        except Exception as e:
            where = "Milvus Lite file" if not uri.startswith(("http://", "https://")) else "Milvus server"
            raise BackendError(f"cannot connect to the {where} {uri} ({type(e).__name__}: {str(e)[:200]}); "
                               "check the URI, that the server runs, and that no other process holds a Lite "
                               "file") from None
        self._has = self.client.has_collection(collection)
        self.unflushed = 0
        self._splade = False
        if self._has:
            fields = {f["name"] for f in self.client.describe_collection(collection)["fields"]}
            self._splade = "splade" in fields
            self.client.load_collection(collection)

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # pragma: no cover - closing a dead connection
            pass

    @property
    def exists(self) -> bool:
        return self._has

    def create(self, dim: int, splade: bool) -> None:
        from pymilvus import DataType, Function, FunctionType

        c = self.client
        s = c.create_schema(auto_id=False, enable_dynamic_field=False)
        s.add_field("id", DataType.INT64, is_primary=True)
        s.add_field("terms", DataType.VARCHAR, max_length=65_535, enable_analyzer=True,
                    analyzer_params=_ANALYZERS[self.analyzer])
        s.add_field("bm25", DataType.SPARSE_FLOAT_VECTOR)
        s.add_field("dense", DataType.FLOAT_VECTOR, dim=dim)
        if splade:
            s.add_field("splade", DataType.SPARSE_FLOAT_VECTOR)
        s.add_field("source_type", DataType.VARCHAR, max_length=32)
        s.add_field("language", DataType.VARCHAR, max_length=16)
        s.add_field("year", DataType.INT64, nullable=True)
        s.add_function(Function(name="bm25_terms", function_type=FunctionType.BM25,
                                input_field_names=["terms"], output_field_names=["bm25"]))
        ip = c.prepare_index_params()
        ip.add_index("dense", index_type=self.dense_index, metric_type="IP", params=self.dense_params)
        ip.add_index("bm25", index_type="SPARSE_INVERTED_INDEX", metric_type="BM25",
                     params={"bm25_k1": self.k1, "bm25_b": self.b})
        if splade:
            ip.add_index("splade", index_type="SPARSE_INVERTED_INDEX", metric_type="IP")
        c.create_collection(self.name, schema=s, index_params=ip, consistency_level="Strong")
        c.load_collection(self.name)
        self._has, self._splade = True, splade

    def upsert(self, ids: np.ndarray, vectors: np.ndarray, terms: list[str], splade, meta: list[tuple]) -> None:
        """meta: (source_type, language, year) per row."""
        if not self._has:
            self.create(int(vectors.shape[1]), splade is not None)
        for a in range(0, len(ids), _BATCH):
            rows = []
            for j in range(a, min(a + _BATCH, len(ids))):
                st, lang, year = meta[j]
                row = {"id": int(ids[j]), "terms": terms[j], "dense": vectors[j].tolist(),
                       "source_type": st or "", "language": lang or "", "year": year}
                if self._splade:
                    row["splade"] = _sparse_row(splade, j)
                rows.append(row)
            self.client.upsert(self.name, rows)
            self.unflushed += len(rows)

    def flush(self) -> None:
        """Seal growing segments so that Milvus indexes them."""
        if self._has and self.unflushed:
            self.client.flush(self.name)
            self.unflushed = 0

    def delete(self, ids: Iterable[int]) -> None:
        ids = [int(i) for i in ids]
        if not self._has:
            return
        for a in range(0, len(ids), 10_000):
            self.client.delete(self.name, ids=ids[a:a + 10_000])

    def delete_above(self, rowid: int) -> None:
        if self._has:
            self.client.delete(self.name, filter=f"id > {int(rowid)}")

    def _search(self, data, field: str, k: int, expr: Optional[str], params: dict) -> list[tuple[int, float]]:
        if not self._has or k < 1:
            return []
        res = self.client.search(self.name, data=[data], anns_field=field, limit=k, filter=expr or "",
                                 output_fields=[], search_params={"params": params})
        return [(int(h["id"]), float(h["distance"])) for h in res[0]]

    def search_dense(self, qvec: np.ndarray, k: int, expr: Optional[str] = None) -> list[tuple[int, float]]:
        return self._search(np.asarray(qvec, dtype=np.float32).tolist(), "dense", k, expr, self.search_params)

    def search_bm25(self, text: str, k: int, expr: Optional[str] = None) -> list[tuple[int, float]]:
        if not text.strip():
            return []
        # Milvus reports BM25 as a negated distance and keeps the (k1 + 1) factor Lucene drops:
        # divided out, the scores equal the embedded index's (medr2.index.sparse.bm25_tf)
        return [(i, abs(s) / (self.k1 + 1)) for i, s in self._search(text, "bm25", k, expr, {})]

    def search_splade(self, q, k: int, expr: Optional[str] = None) -> list[tuple[int, float]]:
        if not self._splade:
            return []
        return self._search(_sparse_row(q, 0), "splade", k, expr, {})

    def rrf(self, qvec: np.ndarray, text: str, dense_k: int, sparse_k: int, k: int, rrf_k: int,
            expr: Optional[str] = None) -> list[tuple[int, float]]:
        """Dense and BM25 fused by reciprocal rank inside Milvus (one hybrid request)."""
        from pymilvus import AnnSearchRequest, RRFRanker

        if not self._has:
            return []
        reqs = [AnnSearchRequest([np.asarray(qvec, dtype=np.float32).tolist()], "dense",
                                 {"params": self.search_params}, dense_k, expr=expr or None)]
        if text.strip():
            reqs.append(AnnSearchRequest([text], "bm25", {"params": {}}, sparse_k, expr=expr or None))
        res = self.client.hybrid_search(self.name, reqs, RRFRanker(rrf_k), limit=k, output_fields=[])
        return [(int(h["id"]), float(h["distance"])) for h in res[0]]

    def vectors(self, ids: list[int]) -> dict[int, np.ndarray]:
        out: dict[int, np.ndarray] = {}
        if not self._has:
            return out
        for a in range(0, len(ids), 1_000):
            chunk = [int(i) for i in ids[a:a + 1_000]]
            for r in self.client.query(self.name, filter=f"id in {chunk}", output_fields=["id", "dense"]):
                out[int(r["id"])] = np.asarray(r["dense"], dtype=np.float32)
        return out

    def count(self) -> int:
        if not self._has:
            return 0
        res = self.client.query(self.name, filter="", output_fields=["count(*)"])
        return int(res[0]["count(*)"])

    def describe(self) -> dict[str, Any]:
        return {"uri": self.uri, "collection": self.name, "analyzer": self.analyzer, "dense_index": self.dense_index,
                "rows": self.count(), "splade": self._splade}


def _sparse_row(m, j: int) -> dict[int, float]:
    row = m.getrow(j)
    return {int(c): float(v) for c, v in zip(row.indices, row.data)}


class MilvusIndex(Index):
    """An index whose vectors and terms live in Milvus; see the module docstring."""

    def _load_segments(self) -> None:
        spec = self.backend_spec
        token = os.environ.get(spec.get("token_env") or "MEDR2_MILVUS_TOKEN") or None
        self.segments = []
        self.mv = MilvusVectors(client_uri(spec, self.path), spec["collection"], spec.get("analyzer", "medr2"),
                                spec.get("dense_index", "FLAT"), spec.get("dense_params"), spec.get("search_params"),
                                token, self.config.sparse.k1, self.config.sparse.b)
        if self.writable:
            self._recover()
        self._stats_cache()

    def _recover(self) -> None:
        """Finish what a killed writer left: rows above the committed ones, recorded deletes."""
        pending = json.loads(self.store.get_meta(PENDING, "[]") or "[]")
        if pending:
            self.mv.delete(pending)
            with self.store.transaction():
                self.store.set_meta(PENDING, "[]")
        self.mv.delete_above(self.store.next_rowid() - 1)

    def close(self) -> None:
        if self.writable:
            self.mv.flush()
        self.mv.close()
        super().close()

    def _stats_cache(self) -> None:
        self._filter_masks = None
        self.n_live = 0  # BM25 statistics are Milvus's; nothing to cache here
        self.avg_len = 1.0

    # writing ------------------------------------------------------------------------------
    def _write_rows(self, ids, vectors, texts, tokens, splade, rows) -> Optional[str]:
        if self.mv.analyzer == "medr2":
            terms = [encode_terms(t) for t in tokens]
        else:
            terms = [_fit(t) for t in texts]
        self.mv.upsert(ids, vectors, terms, splade, [(st, p.language, year) for p, st, year in rows])
        if self.mv.unflushed >= FLUSH_ROWS:
            self.mv.flush()
        return None

    def _discard_rows(self, name, ids) -> None:
        self.mv.delete(ids.tolist())

    def _removing(self, rowids: list[int]) -> None:
        pending = json.loads(self.store.get_meta(PENDING, "[]") or "[]")
        self.store.set_meta(PENDING, json.dumps(sorted(set(pending) | {int(r) for r in rowids})))

    def _mask(self, rowids: list[int]) -> None:
        self.mv.delete(rowids)
        with self.store.transaction():
            self.store.set_meta(PENDING, "[]")

    def maybe_merge(self) -> None:
        """Milvus compacts its own segments."""

    # reading ------------------------------------------------------------------------------
    def allowed(self, source_types=None, year_min=None, year_max=None, languages=None):
        return filter_expr(source_types, year_min, year_max, languages) or None

    def search_dense(self, query_vec, k, allowed=None):
        return self.mv.search_dense(query_vec, k, allowed)

    def query_terms(self, terms: list[str], text: Optional[str]) -> str:
        if self.mv.analyzer == "medr2":
            return encode_terms(dict.fromkeys(terms))
        return text if text is not None else " ".join(terms)

    def search_sparse(self, terms, k, allowed=None, text: Optional[str] = None):
        return self.mv.search_bm25(self.query_terms(terms, text), k, allowed)

    def search_splade(self, text, k, allowed=None):
        if self.splade is None:
            return []
        return self.mv.search_splade(self.splade.encode([text]), k, allowed)

    def fuse_rrf(self, query_vec, terms, text, dense_k, sparse_k, k, rrf_k, allowed=None):
        """RRF of dense and BM25 computed by Milvus (``fusion.method = "rrf"``)."""
        return self.mv.rrf(query_vec, self.query_terms(terms, text), dense_k, sparse_k, k, rrf_k, allowed)

    def vectors_for(self, rowids: list[int]) -> np.ndarray:
        got = self.mv.vectors(list(rowids))
        missing = [r for r in rowids if int(r) not in got]
        if missing:
            raise IndexError_(f"no stored vector for {len(missing)} passage(s) (removed since they were found)")
        return np.stack([got[int(r)] for r in rowids]) if rowids else np.zeros((0, 0), dtype=np.float32)

    def stats(self) -> dict:
        counts = self.store.counts()
        counts.update({
            "index_dir": str(self.path),
            "backend": {k: v for k, v in self.backend_spec.items() if k != "token_env"},
            "milvus": self.mv.describe(),
            "segments": [],
            "dense_model": self.config.dense.model,
            "dense_dim": int(self.store.get_meta("dense_dim") or 0),
            "splade_model": self.config.sparse.splade_model or None,
        })
        lite = lite_path(self.backend_spec, self.path)
        disk = {"store": sum(f.stat().st_size for f in self.path.glob("store.sqlite*")),
                "segments": _du(lite) if lite is not None else 0}
        counts["disk_bytes"] = disk | {"total": sum(disk.values())}
        counts["memory_bytes"] = 0  # held by the Milvus process, not this one
        return counts


def _du(path) -> int:
    if path is None or not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())

