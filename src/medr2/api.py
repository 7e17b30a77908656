"""medr2 from Python: open an index, ingest, search, ask, read the evidence.

One object, :class:`Medr2`, over one index directory. Results are the pydantic models of
:mod:`medr2.schema` (:class:`~medr2.schema.SearchResult`, :class:`~medr2.schema.AskResult` with
its :class:`~medr2.schema.EvidenceRow` table), the same ones ``medr2 search --json``,
``medr2 ask --json`` and the HTTP service return, since the CLI calls this API too.
Models load on first use: ``search`` needs the encoder and the reranker only, ``ask`` also the
generator (``generator="none"`` answers extractively, with no model).

Example (a one-note index, no generator)::

    >>> import tempfile
    >>> from pathlib import Path
    >>> from medr2.api import Medr2
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "gout.md").write_text("# Gout\\n\\nAllopurinol lowers urate and prevents gout flares.\\n")
    >>> with Medr2.open(d / "index", create=True, generator="none", scorer="none") as kb:
    ...     report = kb.ingest([d / "gout.md"])
    ...     hits = kb.search("what prevents gout flares", k=1).hits
    ...     res = kb.ask("What prevents gout flares?")
    >>> report.documents_added, hits[0].title
    (1, 'Gout')
    >>> res.evidence[0].kept, res.citations == [res.evidence[0].passage_id]
    (True, True)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Mapping, Optional, Sequence

from medr2.config import Config

if TYPE_CHECKING:
    from medr2.index.index import Index
    from medr2.ingest.pipeline import IngestReport
    from medr2.pipelines.engine import Engine
    from medr2.schema import AskResult, EvidenceRow, SearchResult
    from medr2.search.hybrid import HybridSearcher


class Medr2:
    """An index and the models its config names.

    ``generator`` / ``scorer`` override ``llm.generator`` / ``llm.scorer`` (``"local"``, ``"none"``,
    a ``.gguf`` path, an ``http(s)://HOST/v1`` endpoint, ``hf:PATH``). Close it (or use ``with``)
    to release the index and the model cache."""

    def __init__(self, index_dir: str | Path, config: Optional[Config] = None, *, generator: Optional[str] = None,
                 scorer: Optional[str] = None):
        from medr2.store.layout import is_index_dir

        self.index_dir = Path(index_dir)
        if not is_index_dir(self.index_dir):
            raise FileNotFoundError(f"no medr2 index at {self.index_dir}; build one with `medr2 ingest PATH "
                                    f"--index {self.index_dir}` or Medr2.open(..., create=True)")
        self.config = config
        self.generator, self.scorer = generator, scorer
        self._index: Optional["Index"] = None
        self._searcher: Optional["HybridSearcher"] = None
        self._engine: Optional["Engine"] = None

    @classmethod
    def open(cls, index_dir: str | Path, config: Optional[Config] = None, *, create: bool = False,
             generator: Optional[str] = None, scorer: Optional[str] = None) -> "Medr2":
        """The index at ``index_dir``; with ``create`` an empty one is made there first (the
        directory must be new or empty) with ``config``'s settings."""
        if create:
            from medr2.index.index import Index
            from medr2.store.layout import is_index_dir

            if not is_index_dir(Path(index_dir)):
                Index.open(index_dir, config or Config(), create=True).close()
        return cls(index_dir, config, generator=generator, scorer=scorer)

    @classmethod
    def over(cls, engine: "Engine") -> "Medr2":
        """The API over an engine held open elsewhere (the HTTP service's, which reopens it after
        writes): search and ask use it; closing this object leaves it open."""
        kb = cls.__new__(cls)
        kb.index_dir, kb.config = Path(engine.index.path), engine.config
        kb.generator = kb.scorer = None
        kb._index, kb._engine, kb._searcher = engine.index, engine, engine.searcher
        kb._borrowed = True
        return kb

    # reading ------------------------------------------------------------------------------
    @property
    def index(self) -> "Index":
        """The index opened for reading (opened on first use)."""
        if self._index is None:
            from medr2.index.index import Index

            self._index = Index.open(self.index_dir, self.config)
        return self._index

    @property
    def engine(self) -> "Engine":
        """Every component a pipeline draws from, with the generator and scorer loaded."""
        if self._engine is None:
            from medr2.llm.factory import load_models
            from medr2.pipelines.engine import Engine

            idx = self.index
            m = load_models(idx.config, self.index_dir, self.generator, self.scorer)
            self._engine = Engine(idx, idx.config, m.generator, m.scorer, m.cache)
            self._searcher = self._engine.searcher
        return self._engine

    def search(self, query: str, k: int = 10, *, source_types: Sequence[str] = (), year_min: Optional[int] = None,
               year_max: Optional[int] = None, languages: Sequence[str] = (), fusion: Optional[str] = None
               ) -> "SearchResult":
        """Hybrid search (dense + BM25, fused, coarse-reranked), filtered by source type, year
        and language; raises :class:`medr2.search.hybrid.QueryError` for a query or filter that
        cannot be searched."""
        from medr2.search.hybrid import Filters, HybridSearcher, validate_query

        filters = Filters(list(source_types), year_min, year_max, list(languages))
        # a query that cannot be searched is refused before any model loads
        query = validate_query(query, self.index.config.query.max_query_chars)
        if self._searcher is None:
            self._searcher = HybridSearcher(self.index)
        return self._searcher.search(query, k=k, filters=filters, fusion=fusion)

    def ask(self, question: str, options: Optional[Mapping[str, str]] = None, *, pipeline: str = "medr2",
            rounds: Optional[int] = None, answer_mode: str = "generate") -> "AskResult":
        """Answer ``question`` (multiple choice when ``options`` maps letters to texts) with the
        registered ``pipeline`` (:data:`medr2.pipelines.PIPELINES`); the result carries the
        answer, its citations and the evidence table."""
        from medr2.pipelines import Pipeline

        return Pipeline(self.engine, pipeline, rounds, answer_mode).run(question, dict(options or {}))

    @staticmethod
    def evidence(result: "AskResult", kept_only: bool = False) -> list["EvidenceRow"]:
        """The evidence table of an answer: every appraised passage with its relevance, level,
        f_h, f_g, f_u, F, whether it reached the context and why not (``kept_only``: the context)."""
        return [r for r in result.evidence if r.kept or not kept_only]

    def passage(self, passage_id: str) -> Optional[dict]:
        """One passage (text, heading path, offsets) with its document (title, source type,
        year, origin, url, publication types); None when the index has no such passage."""
        store = self.index.store
        rid = store.rowid_of(passage_id)
        if rid is None:
            return None
        p = dict(store.passages([rid])[rid])
        doc = store.get_document(p["doc_id"])
        p["document"] = {"doc_id": doc.doc_id, "title": doc.title, "source_type": doc.source_type.value,
                         "year": doc.meta.year, "origin": doc.meta.origin, "url": doc.meta.url,
                         "publication_types": doc.meta.publication_types} if doc else None
        return p

    def stats(self) -> dict:
        """Documents, passages, segments, models and disk use of the index."""
        return self.index.stats()

    # writing ------------------------------------------------------------------------------
    def ingest(self, paths: Iterable[str | Path], *, fmt: Optional[str] = None, force: bool = False,
               progress: bool = False) -> "IngestReport":
        """Add files and folders (re-ingesting an unchanged file is a no-op); the next search
        sees them. Raises if another process is writing the index."""
        from medr2.index.index import Index
        from medr2.ingest.pipeline import ingest

        self._release()
        idx = Index.open(self.index_dir, self.config, writable=True)
        try:
            return ingest(idx, list(paths), fmt=fmt, force=force, progress=progress)
        finally:
            idx.close()

    def remove(self, doc_ids: Iterable[str]) -> int:
        """Remove documents by id; returns how many passages went with them."""
        from medr2.index.index import Index

        self._release()
        idx = Index.open(self.index_dir, self.config, writable=True)
        try:
            return idx.remove_documents(list(doc_ids))
        finally:
            idx.close()

    # lifetime -----------------------------------------------------------------------------
    def _release(self) -> None:
        """Close what reads the index (reopened on next use, so it sees the writes)."""
        if getattr(self, "_borrowed", False):
            raise RuntimeError("this Medr2 object runs over an engine held elsewhere (Medr2.over): it searches "
                               "and asks; ingest and remove through the owner of that engine")
        if self._engine is not None:
            self._engine.close()  # closes the index too
        elif self._index is not None:
            self._index.close()
        self._engine = self._searcher = self._index = None

    def close(self) -> None:
        if not getattr(self, "_borrowed", False):
            self._release()

    def __enter__(self) -> "Medr2":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
