"""``medr2 doc`` (show or remove documents) and ``medr2 index`` (statistics, migration to Milvus)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from medr2.cli.common import EXIT_PARTIAL, EXIT_USAGE, fail, index_opt, open_index


@click.group()
def doc() -> None:
    """Inspect or remove documents."""


@doc.command("remove")
@click.argument("doc_ids", nargs=-1, required=True)
@index_opt
def doc_remove(doc_ids, index_dir):
    """Remove documents (and their passages, from every index)."""
    idx = open_index(index_dir, None, writable=True)
    try:
        missing = [d for d in doc_ids if not idx.store.has_document(d)]
        present = [d for d in doc_ids if d not in missing]
        n = idx.remove_documents(present) if present else 0
    finally:
        idx.close()
    for d in missing:
        click.echo(f"not found: {d}", err=True)
    click.echo(f"removed {len(present)} document(s), {n} passage(s)")
    if present:
        from medr2.kg.build import withdraw_documents

        kg = withdraw_documents(index_dir, present)
        if kg is not None:
            click.echo(f"knowledge graph: {kg['triples_removed']} triple(s) removed (no other support), "
                       f"{kg['triples_rescored']} rescored")
    sys.exit(EXIT_USAGE if missing and not present else (EXIT_PARTIAL if missing else 0))


@doc.command("show")
@click.argument("doc_id")
@index_opt
@click.option("--json", "as_json", is_flag=True)
def doc_show(doc_id, index_dir, as_json):
    """Show a document's heading tree and passages."""
    idx = open_index(index_dir, None)
    try:
        d = idx.store.get_document(doc_id)
        passages = idx.store.doc_passages(doc_id) if d else []
    finally:
        idx.close()
    if d is None:
        fail(f"no document {doc_id!r} in {index_dir}", EXIT_USAGE)
    if as_json:
        click.echo(json.dumps({"document": d.to_dict(), "passages": [p.to_dict() for p in passages]}, indent=2,
                              ensure_ascii=False))
        return
    click.echo(f"{d.doc_id} [{d.source_type.value}] {d.title}")
    for path, _ in d.walk():
        click.echo("  " * len(path) + path[-1] if path else "")
    click.echo(f"{len(passages)} passage(s)")
    for p in passages:
        click.echo(f"  {p.passage_id} [{p.start}:{p.end}] {' > '.join(p.heading_path)}")


@click.group("index")
def index_group() -> None:
    """Index maintenance."""


@index_group.command("stats")
@index_opt
@click.option("--json", "as_json", is_flag=True)
def index_stats(index_dir, as_json):
    """Documents, passages by source type, index sizes."""
    idx = open_index(index_dir, None)
    try:
        st = idx.stats()
    finally:
        idx.close()
    if as_json:
        click.echo(json.dumps(st, indent=2))
        return
    click.echo(f"index: {st['index_dir']}")
    click.echo(f"documents: {st['documents']}   passages: {st['passages']}")
    for t, v in sorted(st["by_source_type"].items()):
        click.echo(f"  {t:<10} documents {v.get('documents', 0):>7}   passages {v.get('passages', 0):>8}")
    click.echo(f"languages: {st['languages']}   files: {st['files']}")
    if "milvus" in st:
        m = st["milvus"]
        click.echo(f"dense: {st['dense_model']} ({st['dense_dim']}-d)   milvus: {m['uri']} collection "
                   f"{m['collection']} ({m['rows']} rows, {m['dense_index']}, analyzer {m['analyzer']})")
    else:
        click.echo(f"dense: {st['dense_model']} ({st['dense_dim']}-d)   segments: "
                   + ", ".join(f"{s['kind']}:{s['live']}/{s['rows']}" for s in st["segments"]))
    d = st["disk_bytes"]
    click.echo(f"disk: store {d['store'] / 1e6:.1f} MB, segments {d['segments'] / 1e6:.1f} MB, total "
               f"{d['total'] / 1e6:.1f} MB   memory (segments): {st['memory_bytes'] / 1e6:.1f} MB")


@index_group.command("migrate")
@click.option("--from", "src_dir", required=True, type=click.Path(file_okay=False, exists=True),
              help="An embedded index directory (left unchanged).")
@click.option("--to", "target", required=True,
              help="Milvus: milvus://host:19530, http://host:19530, or milvus-lite:PATH (a Lite file).")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Directory of the new index (default: the source directory name + '-milvus').")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal).")
def index_migrate(src_dir, target, out_dir, progress):
    """Copy an embedded index to Milvus without re-embedding (vectors, BM25 terms, SPLADE)."""
    from medr2.store.layout import BackendError
    from medr2.index.migrate import migrate_to_milvus

    out = out_dir or str(Path(src_dir).resolve()) + "-milvus"
    show = sys.stderr.isatty() if progress is None else progress
    try:
        n = migrate_to_milvus(Path(src_dir), target, Path(out), progress=show)
    except BackendError as e:
        fail(str(e), EXIT_USAGE)
    click.echo(f"migrated {n} passages to {target}; the new index is {out} (search it with --index {out})")
