"""Ingestion workflow: files -> loaders -> segmentation -> committed index batches.

Each file is read by the loader its type (or ``--format``) selects; bad files and bad records
are reported with their path and reason while the rest is ingested. What is left out without
being wrong (a symlink loop in a folder, a records file whose every record is skipped by
design) is reported as a warning, which does not change the status. Batches of about
``ingest.batch_passages`` passages are committed one transaction each; a file is marked done,
with its content hash, in the transaction of its last batch. So:

* re-ingesting an unchanged file is a no-op;
* a changed file replaces its documents (documents it no longer holds are removed unless
  another file provides them); a document whose content is unchanged is not embedded again,
  even when it moved within its file (its stored origin is updated);
* a killed run resumes where it stopped: committed documents are recognised by id and content
  hash and skipped, and the end state equals that of an uninterrupted run.

Example::

    >>> import tempfile
    >>> from pathlib import Path
    >>> from medr2.index.index import Index
    >>> from medr2.ingest.pipeline import ingest
    >>> d = Path(tempfile.mkdtemp())
    >>> _ = (d / "note.md").write_text("# Gout\\n\\nAllopurinol is first-line urate-lowering therapy.\\n")
    >>> index = Index.open(d / "index", create=True)
    >>> report = ingest(index, [d / "note.md"], progress=False)
    >>> report.status, report.documents_added, report.passages_added > 0
    ('ok', 1, True)
    >>> again = ingest(index, [d / "note.md"], progress=False)      # an unchanged file is a no-op
    >>> again.files_unchanged, again.passages_added
    (1, 0)
    >>> index.close()
"""

from __future__ import annotations

import errno
import hashlib
import sqlite3
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Union

from tqdm import tqdm

from medr2.index.index import Index, PendingDoc, batch_texts
from medr2.ingest.loaders.base import Loader, LoadError, Notice, Problem, get_loader, loaders
from medr2.ingest.loaders.corpora import sniff
from medr2.ingest.segment import segment_document
from medr2.util.extras import errors_of

_PG_ERRORS = errors_of("psycopg", "Error")  # the PostgreSQL store's (the 'postgres' extra)


class IngestAborted(RuntimeError):
    """Committing to the index failed (disk full, unreadable dictionary...): the run stopped.
    Committed batches are kept; fix the cause and run the same command again to resume."""


@dataclass
class IngestReport:
    files_seen: int = 0
    files_ingested: int = 0
    files_unchanged: int = 0
    documents_added: int = 0
    documents_updated: int = 0
    documents_unchanged: int = 0
    documents_removed: int = 0
    passages_added: int = 0
    truncated_sections: int = 0
    failed_files: list[Problem] = field(default_factory=list)
    record_problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)  # left out, not failed: the status stays
    seconds: float = 0.0

    @property
    def status(self) -> str:
        if not self.failed_files and not self.record_problems:
            return "ok"
        if self.files_ingested or self.files_unchanged:
            return "partial"
        return "failed"

    @property
    def exit_code(self) -> int:
        return {"ok": 0, "partial": 3, "failed": 1}[self.status]

    def to_dict(self) -> dict:
        lists = ("failed_files", "record_problems", "warnings")
        d = {k: v for k, v in self.__dict__.items() if k not in lists}
        d["status"] = self.status
        for name in lists:
            d[name] = [{"path": p.path, "reason": p.reason} for p in getattr(self, name)]
        return d


def symlink_loop(path: Path) -> bool:
    """Whether the symlink ``path`` never resolves (a -> b -> a) or points at a folder holding it
    (walking it would never end)."""
    try:
        target = path.resolve(strict=True)
    except RuntimeError:  # Python before 3.13: "Symlink loop from ..."
        return True
    except OSError as e:
        return e.errno == errno.ELOOP
    parent = path.parent.resolve()
    return target == parent or target in parent.parents


def expand_paths(paths: Iterable[str | Path],
                 exclude: Optional[Path] = None) -> tuple[list[Path], list[Problem], list[Problem]]:
    """Files under the given paths (directories recursively, hidden entries and anything under
    ``exclude``, the index itself, skipped), sorted; the paths that do not exist; the symlink
    loops found in directories (not followed, reported)."""
    files: list[Path] = []
    problems: list[Problem] = []
    loops: list[Problem] = []
    skip = exclude.resolve() if exclude is not None else None
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            problems.append(Problem(str(p), "no such file or directory"))
        elif p.is_dir():
            for f in sorted(p.rglob("*")):
                if any(part.startswith(".") for part in f.relative_to(p).parts):
                    continue
                if f.is_file():
                    files.append(f)
                elif f.is_symlink() and symlink_loop(f):
                    loops.append(Problem(str(f), "symlink loop"))
        elif p.is_file():
            files.append(p)
        else:
            problems.append(Problem(str(p), "not a regular file"))
    seen, unique = set(), []
    for f in files:
        key = f.resolve()
        if skip is not None and (key == skip or skip in key.parents):
            continue
        if key not in seen:
            seen.add(key)
            unique.append(f)
    return unique, problems, loops


def choose_loader(path: Path, fmt: Optional[str]) -> Loader:
    if fmt:
        return get_loader(fmt)
    known = sniff(path)
    if known:
        return get_loader(known)
    suffix = path.suffix.lower()
    for loader in loaders().values():
        if suffix in loader.suffixes:
            return loader
    raise LoadError(f"unsupported file type {suffix or '(no extension)'!r}; pass --format "
                    f"({', '.join(sorted(loaders()))})")


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class Batch:
    """Documents, file links and finished files waiting for one commit (files share batches).

    With an encoder pool, a full batch is handed to the workers and committed, in order, when
    its encoding is back; at most ``2 x workers`` batches are in flight.
    """

    def __init__(self, index: Index, report: IngestReport, bar, pool=None):
        self.index, self.report, self.bar, self.pool = index, report, bar, pool
        self.docs: dict[str, PendingDoc] = {}
        self.n_passages = 0
        self.links: list[tuple[str, str]] = []
        self.removals: set[str] = set()
        self.finished: list[tuple] = []  # (key, sha, size, n_docs, problems, unlink)
        self.refresh: list[tuple] = []  # (doc id, meta, content hash) of documents read again unchanged
        self.inflight: deque = deque()
        self.inflight_hashes: dict[str, str] = {}  # doc id -> content hash, sent but not committed

    def pending_hash(self, doc_id: str):
        d = self.docs.get(doc_id)
        return d.content_hash if d else self.inflight_hashes.get(doc_id)

    def add(self, doc: PendingDoc) -> None:
        old = self.docs.pop(doc.doc.doc_id, None)
        if old is not None:
            self.n_passages -= len(old.passages)
        self.docs[doc.doc.doc_id] = doc
        self.n_passages += len(doc.passages)

    def commit(self) -> None:
        if not (self.docs or self.links or self.removals or self.finished or self.refresh):
            return
        linked = {d for _, d in self.links}
        removals = [d for d in self.removals if d not in linked and d not in self.docs]
        links, finished = list(self.links), list(self.finished)
        docs = list(self.docs.values())
        # a document written anew in this batch (another file's new version) keeps that version's hash
        refresh = [r for r in self.refresh if r[0] not in self.docs]

        def bookkeeping(store) -> None:
            for key, doc_id in links:
                store.link_file_docs(key, [doc_id])
            for doc_id, meta, content_hash in refresh:
                store.refresh_document(doc_id, meta, content_hash)
            for key, sha, size, n_docs, problems, unlink in finished:
                store.unlink_file_docs(key, unlink)
                store.mark_file(key, sha, size, "done", n_docs, problems)

        self.docs, self.n_passages, self.links, self.removals, self.finished = {}, 0, [], set(), []
        self.refresh = []
        if self.pool is None:
            self._write(docs, removals, bookkeeping, None)
            return
        texts, languages = batch_texts(docs)
        future = self.pool.submit(texts, languages) if texts else None
        self.inflight.append((docs, removals, bookkeeping, future))
        self.inflight_hashes.update((d.doc.doc_id, d.content_hash) for d in docs)
        while len(self.inflight) > 2 * self.pool.workers:
            self._drain_one()

    def _drain_one(self) -> None:
        docs, removals, bookkeeping, future = self.inflight.popleft()
        try:
            encoded = future.result() if future is not None else None
        except Exception as e:
            raise IngestAborted(f"an ingestion worker failed ({type(e).__name__}: {str(e)[:300]}); committed "
                                "batches are kept, run the same command again once the cause is fixed") from e
        self._write(docs, removals, bookkeeping, encoded)
        for d in docs:
            if self.inflight_hashes.get(d.doc.doc_id) == d.content_hash:
                del self.inflight_hashes[d.doc.doc_id]

    def flush(self) -> None:
        """Commit what is staged, then wait for every batch in flight."""
        self.commit()
        while self.inflight:
            self._drain_one()

    def _write(self, docs, removals, bookkeeping, encoded) -> None:
        try:
            added = self.index.commit(docs, removals, bookkeeping, encoded=encoded)
        except (OSError, sqlite3.Error, *_PG_ERRORS, RuntimeError, ValueError) as e:
            raise IngestAborted(f"writing to the index failed ({type(e).__name__}: {e}); committed batches "
                                "are kept, run the same command again once the cause is fixed") from e
        self.report.passages_added += added
        self.report.documents_removed += len(removals)
        self.bar.update(added)


def ingest(index: Index, paths: Iterable[str | Path], fmt: Optional[str] = None, force: bool = False,
           progress: bool = True, workers: Optional[int] = None) -> IngestReport:
    """Ingest files; ``workers`` (default ``ingest.workers``) above 1 embeds batches in parallel."""
    t0 = time.perf_counter()
    report = IngestReport()
    files, missing, loops = expand_paths(paths, exclude=index.path)
    report.failed_files.extend(missing)
    report.warnings.extend(loops)
    total_bytes = sum(f.stat().st_size for f in files)
    workers = workers or index.config.ingest.workers
    bar = tqdm(unit=" passages", disable=not progress, dynamic_ncols=True, leave=False)
    pool = None
    if workers > 1:
        from medr2.ingest.parallel import EncoderPool

        pool = EncoderPool(index.config, workers, index.config.ingest.executor)
    batch = Batch(index, report, bar, pool)
    done_bytes = 0
    ok = False
    try:
        for n, path in enumerate(files, 1):
            report.files_seen += 1
            pct = 100 * done_bytes / total_bytes if total_bytes else 100
            bar.set_description(f"file {n}/{len(files)} ({pct:.0f}% of {total_bytes / 1e6:.0f} MB) {path.name[:30]}")
            try:
                _ingest_file(index, path, fmt, force, report, batch)
            except IngestAborted:
                raise
            except LoadError as e:
                report.failed_files.append(Problem(str(path), str(e)))
            except Exception as e:  # a loader met input it does not understand: report the file, go on
                report.failed_files.append(Problem(str(path), f"cannot read ({type(e).__name__}: {str(e)[:300]})"))
            done_bytes += path.stat().st_size if path.exists() else 0
        batch.flush()
        ok = True
    finally:
        if pool is not None:
            pool.close(cancel=not ok)
        bar.close()
    report.seconds = time.perf_counter() - t0
    return report


def _ingest_file(index: Index, path: Path, fmt: Optional[str], force: bool, report: IngestReport,
                 batch: Batch) -> None:
    cfg = index.config
    store = index.store
    key = str(path.resolve())
    size = path.stat().st_size
    if size == 0:
        raise LoadError("empty file")
    sha = file_sha256(path)
    state = store.file_state(key)
    if state == (sha, "done") and not force:
        report.files_unchanged += 1
        return
    loader = choose_loader(path, fmt)
    if not loader.streaming and size > cfg.ingest.max_whole_file_mb * 1024 * 1024:
        raise LoadError(f"file is {size / 1e6:.0f} MB, above ingest.max_whole_file_mb="
                        f"{cfg.ingest.max_whole_file_mb} for format {loader.name}; split it or raise the limit")
    # read the whole file's documents before touching the batch, so a file that fails midway
    # (corrupt PDF, undecodable text) contributes nothing
    previously = store.file_doc_ids(key)
    seen: set[str] = set()
    problems = 0
    added = updated = 0
    staged: list[tuple[str, Union[PendingDoc, tuple, None]]] = []  # a document to write, or one to refresh
    n_staged = 0

    def stage_flush() -> None:
        nonlocal n_staged
        for doc_id, pending in staged:
            batch.links.append((key, doc_id))
            if isinstance(pending, PendingDoc):
                batch.add(pending)
            elif pending is not None:  # unchanged: (doc id, meta, content hash) to refresh
                batch.refresh.append(pending)
        staged.clear()
        n_staged = 0
        if batch.n_passages >= cfg.ingest.batch_passages:
            batch.commit()

    for item in loader.load(path, cfg):
        if isinstance(item, Notice):
            report.warnings.append(item)
            continue
        if isinstance(item, Problem):
            report.record_problems.append(item)
            problems += 1
            continue
        doc = item
        if doc.doc_id in seen:
            report.record_problems.append(Problem(f"{doc.meta.origin or path}", f"duplicate document id {doc.doc_id}; "
                                                  "the first record with this id was kept"))
            problems += 1
            continue
        seen.add(doc.doc_id)
        content_hash = doc.content_hash()
        pending = batch.pending_hash(doc.doc_id)
        stored = pending or store.doc_hash(doc.doc_id)
        if stored is not None and stored in (content_hash, doc.content_hash(with_origin=True)):
            report.documents_unchanged += 1
            # stored, not pending: it may have moved in its file (its origin is refreshed with the file)
            staged.append((doc.doc_id, None if pending else (doc.doc_id, doc.meta, content_hash)))
            continue
        seg = segment_document(doc, cfg.segment)
        report.truncated_sections += seg.truncated_sections
        in_store = store.has_document(doc.doc_id) or doc.doc_id in batch.inflight_hashes
        if not seg.passages:
            report.record_problems.append(Problem(f"{doc.meta.origin or path}", "no text left after segmentation"))
            problems += 1
            if in_store:  # its new version is empty: the old one must not stay searchable
                batch.removals.add(doc.doc_id)
            continue
        staged.append((doc.doc_id, PendingDoc(seg.doc, seg.passages, content_hash, replaces=in_store)))
        n_staged += len(seg.passages)
        if in_store or stored is not None:
            updated += 1
        else:
            added += 1
        if loader.streaming and n_staged + batch.n_passages >= cfg.ingest.batch_passages:
            stage_flush()  # large record files commit as they go; a killed run resumes by content hash
    stage_flush()
    stale = previously - seen
    batch.removals.update(d for d in stale if not store.linked_elsewhere(d, key))
    batch.finished.append((key, sha, size, len(seen), problems, stale))
    report.documents_added += added
    report.documents_updated += updated
    report.files_ingested += 1
