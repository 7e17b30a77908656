"""The corpus: ``GET /documents`` (a page of the index's documents), ``POST /documents`` (upload
one file, ingested by a background job, 202), ``GET /jobs/{job_id}`` (that job's state) and
``DELETE /documents/{doc_id}``. Uploads and removals need the bearer token; each write updates
the knowledge graph when the index has one and then retires the engine, so the next request
reads the changed index.

Uploads are at most ``serve.max_upload_mb``, of a type a loader of :mod:`medr2.ingest.loaders`
reads (else 415); the file name must be plain (letters, digits, ``.``, ``-``, ``_``, spaces; no
leading dot)::

    >>> safe_name("guideline 2024.pdf"), safe_name("../../etc/passwd"), safe_name(".env")
    ('guideline 2024.pdf', 'passwd', None)
    >>> ".pdf" in upload_suffixes(), ".exe" in upload_suffixes()
    (True, False)

An upload job whose file could not be ingested ends ``failed``; its messages name the uploaded
file, never a path on the server. A write while another process writes the index is refused
with 409 (a removal) or fails its job (an upload).
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Optional

from fastapi import APIRouter, Depends, File, HTTPException, Query, UploadFile

from medr2.serve.deps import State, reader, writer
from medr2.serve.state import JobFailed, ServeState, WriterBusy

_SAFE_NAME = re.compile(r"^[\w][\w.\- ]{0,120}$")

router = APIRouter()


def safe_name(filename: Optional[str]) -> Optional[str]:
    """The upload's base name, or None when it is not safe to write."""
    name = Path(filename or "").name
    if not name or not _SAFE_NAME.match(name) or name.startswith(".") or ".." in name:
        return None
    return name


def upload_suffixes() -> list[str]:
    """The file name endings the loaders read, sorted (what an upload may end with)."""
    from medr2.ingest.loaders.base import loaders

    return sorted({s for loader in loaders().values() for s in loader.suffixes})


@router.get("/documents", dependencies=[Depends(reader)])
def documents(st: State, limit: int = Query(50, ge=1, le=1000), offset: int = Query(0, ge=0)) -> dict[str, Any]:
    with st.holder.use() as e:
        db = e.index.store.db
        total = db.execute("SELECT COUNT(*) FROM documents").fetchone()[0]
        rows = db.execute("SELECT doc_id, title, source_type, year, n_passages FROM documents ORDER BY doc_id "
                          "LIMIT ? OFFSET ?", (limit, offset)).fetchall()
    return {"total": total, "documents": [dict(zip(["doc_id", "title", "source_type", "year", "passages"], r))
                                          for r in rows]}


@router.post("/documents", status_code=202, dependencies=[Depends(writer)])
async def upload(st: State, file: UploadFile = File(...)) -> dict[str, Any]:
    name = safe_name(file.filename)
    if name is None:
        raise HTTPException(400, f"unsafe file name {file.filename!r}: use letters, digits, '.', '-', '_'")
    suffix = Path(name).suffix.lower()
    if suffix not in upload_suffixes():
        raise HTTPException(415, f"unsupported file type {suffix or '(no extension)'!r}; upload one of: "
                                 f"{', '.join(upload_suffixes())}")
    sv = st.sv
    limit = sv.max_upload_mb * 1024 * 1024
    job_dir = Path(tempfile.mkdtemp(prefix="medr2-upload-"))  # outside the index: ingestion skips its own dir
    dest = job_dir / name
    size = 0
    with open(dest, "wb") as f:
        while chunk := await file.read(1 << 20):
            size += len(chunk)
            if size > limit:
                f.close()
                shutil.rmtree(job_dir, ignore_errors=True)
                raise HTTPException(413, f"upload larger than {sv.max_upload_mb} MB (serve.max_upload_mb)")
            f.write(chunk)
    if size == 0:
        shutil.rmtree(job_dir, ignore_errors=True)
        raise HTTPException(400, f"{name} is empty")

    def scrub(text: str) -> str:
        """``text`` with the server's paths replaced by the upload's name."""
        return text.replace(str(dest), name).replace(str(job_dir), "upload").replace(str(st.index_dir), "the index")

    def ingest_job(job) -> dict[str, Any]:
        from medr2.ingest.pipeline import ingest as run_ingest

        detail: dict[str, Any] = {"file": name, "bytes": size}
        try:
            with st.open_index(writable=True) as idx:
                rep = run_ingest(idx, [dest], progress=False)
        except Exception as e:  # reported by the job, without server paths
            why = str(e) if isinstance(e, WriterBusy) else f"{type(e).__name__}: {e}"
            raise JobFailed(f"{name} was not ingested: {scrub(why)}", detail) from None
        finally:
            shutil.rmtree(job_dir, ignore_errors=True)
        found = rep.failed_files + rep.record_problems
        detail.update(status=rep.status, documents_added=rep.documents_added, passages_added=rep.passages_added,
                      problems=[scrub(str(p)) for p in found][:20])
        if rep.status == "failed":
            raise JobFailed(f"{name} was not ingested: " + "; ".join(scrub(p.reason) for p in found[:3]), detail)
        detail["kg"] = sync_kg(st)
        st.holder.reload()
        return detail

    job = st.jobs.submit("ingest", ingest_job)
    return {"job": job.to_dict(), "status_url": f"/jobs/{job.id}"}


def sync_kg(st: ServeState) -> Optional[dict[str, Any]]:
    """Bring the knowledge graph (if any) up to the index after an ingestion (the extractors
    without a model: rules and structured)."""
    from medr2.kg.build import KGBuilder, has_kg, library_for, make_extractors, open_kg, stored_config, sync_index

    if not has_kg(st.index_dir):
        return None
    kg = open_kg(st.index_dir)
    try:
        kc = stored_config(kg)
        lib = library_for(kc)
        names = [n for n in kc.extractors if n != "llm"]
        with st.open_index() as idx:
            rep = sync_index(idx.store, KGBuilder(kg, lib, make_extractors(names, lib), kc))
        return {k: rep[k] for k in ("documents_added", "documents_removed", "triples_recomputed")}
    finally:
        kg.close()


@router.get("/jobs/{job_id}", dependencies=[Depends(reader)])
def job_status(job_id: str, st: State) -> dict[str, Any]:
    job = st.jobs.get(job_id)
    if job is None:
        raise HTTPException(404, f"no job {job_id!r}")
    return job.to_dict()


@router.delete("/documents/{doc_id:path}", dependencies=[Depends(writer)])
def delete_document(doc_id: str, st: State) -> dict[str, Any]:
    from medr2.kg.build import withdraw_documents

    def remove() -> dict[str, Any]:
        with st.open_index(writable=True) as idx:
            if not idx.store.has_document(doc_id):
                raise HTTPException(404, f"no document {doc_id!r}")
            n = idx.remove_documents([doc_id])
        kg = withdraw_documents(st.index_dir, [doc_id])
        st.holder.reload()
        return {"removed": doc_id, "passages": n, "kg": kg}

    try:
        return st.jobs.run_now(remove)
    except WriterBusy as e:
        raise HTTPException(409, str(e)) from None
