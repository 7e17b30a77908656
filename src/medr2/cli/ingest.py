"""``medr2 ingest`` (files and directories into an index) and ``medr2 formats`` (the loaders)."""

from __future__ import annotations

import json
import sys
from typing import Optional

import click

from medr2.cli.common import EXIT_USAGE, config_opt, fail, index_opt, load_config, model_errors, open_index
from medr2.config import Config


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@index_opt
@config_opt
@click.option("--format", "fmt", help="Loader to use for every file (default: by file type and content).")
@click.option("--map", "mapping", multiple=True, metavar="FIELD=SOURCE",
              help="JSON/JSONL/CSV field mapping, e.g. --map text=abstract --map id=pmid.")
@click.option("--source-type", type=click.Choice(["paper", "entry", "book", "guideline", "other"]),
              help="Source type for documents that do not name one: JSON/JSONL/CSV records without the "
                   "field, Markdown/text without front matter, HTML, PDF.")
@click.option("--force", is_flag=True, help="Re-read files even when unchanged.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal).")
@click.option("--backend", type=click.Choice(["embedded", "milvus"]),
              help="Vectors and terms of a new index: embedded segment files (default) or Milvus.")
@click.option("--uri", help="Milvus: a Lite file or http://host:19530 (default: DIR/milvus.db).")
@click.option("--store", type=click.Choice(["sqlite", "postgres"]),
              help="Documents, passages and graph of a new index: SQLite in DIR (default) or PostgreSQL.")
@click.option("--store-uri", help="PostgreSQL: postgresql://user@host:5432/db (password from PGPASSWORD).")
@click.option("--workers", type=int, default=None,
              help="Worker processes that read, segment and embed files in parallel (default: ingest.workers).")
def ingest(paths, index_dir, config_path, fmt, mapping, source_type, force, as_json, progress, backend, uri, store,
           store_uri, workers):
    """Ingest files or directories into an index (created when missing)."""
    from medr2.ingest.loaders.base import LoadError, get_loader
    from medr2.ingest.loaders.records import check_mapping
    from medr2.ingest.pipeline import IngestAborted
    from medr2.ingest.pipeline import ingest as run

    config = load_config(config_path)
    fields = {}
    for m in mapping:
        if "=" not in m:
            fail(f"--map {m!r} must look like FIELD=SOURCE (e.g. text=abstract)", EXIT_USAGE)
        k, v = m.split("=", 1)
        fields[k.strip()] = v.strip()
    try:
        check_mapping(fields)
        if fmt:
            get_loader(fmt)
    except LoadError as e:
        fail(str(e), EXIT_USAGE)
    config = _with_backend(config, backend, uri, store, store_uri)
    if workers is not None and workers < 1:
        fail("--workers must be at least 1", EXIT_USAGE)
    idx = open_index(index_dir, config, writable=True, create=True)
    # per-run options do not change what the index is bound to
    if fields:
        idx.config.ingest.json_fields.update(fields)
    if source_type:
        idx.config.ingest.source_type = source_type
    show = sys.stderr.isatty() if progress is None else progress
    try:
        report = run(idx, paths, fmt=fmt, force=force, progress=show, workers=workers)
    except KeyboardInterrupt:
        click.echo("interrupted: committed batches are kept; run the same command again to resume", err=True)
        sys.exit(130)
    except IngestAborted as e:
        fail(str(e))
    except model_errors() as e:
        fail(f"{e}; committed batches are kept")
    finally:
        idx.close()
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        _print_report(report)
    sys.exit(report.exit_code)


def _print_report(report) -> None:
    """The failed files, skipped records and warnings on stderr, then a summary line."""
    for p in report.failed_files:
        click.echo(f"FAILED  {p.path}: {p.reason}", err=True)
    for p in report.warnings:
        click.echo(f"WARNING {p.path}: {p.reason}", err=True)
    shown = report.record_problems[:50]
    for p in shown:
        click.echo(f"SKIPPED {p.path}: {p.reason}", err=True)
    if len(report.record_problems) > len(shown):
        click.echo(f"... and {len(report.record_problems) - len(shown)} more skipped records (use --json)", err=True)
    click.echo(
        f"{report.status}: {report.files_ingested} file(s) ingested, {report.files_unchanged} unchanged, "
        f"{len(report.failed_files)} failed; documents +{report.documents_added} "
        f"~{report.documents_updated} -{report.documents_removed} ={report.documents_unchanged}; "
        f"{report.passages_added} passages in {report.seconds:.1f}s"
        + (f"; {report.truncated_sections} section(s) truncated at segment.max_unit_tokens"
           if report.truncated_sections else "")
        + (f"; {len(report.warnings)} warning(s)" if report.warnings else "")
    )


def _with_backend(config: Optional[Config], backend, uri, store, store_uri) -> Optional[Config]:
    """The config with the engine options of the command line (they only matter for a new index;
    an existing one refuses options that contradict its engines)."""
    if not (backend or uri or store or store_uri):
        return config
    config = config or Config()
    if uri and not backend:
        backend = "milvus"
    if store_uri and not store:
        store = "postgres"
    if backend:
        config.index.backend = backend
    if uri:
        config.index.uri = uri
    if store:
        config.index.store = store
    if store_uri:
        config.index.store_uri = store_uri
    return config


@click.command()
def formats():
    """List the loaders and the file types they read."""
    from medr2.ingest.loaders.base import loaders

    for name, ld in sorted(loaders().items()):
        click.echo(f"{name:<12} {' '.join(ld.suffixes) or '(by content or --format)':<22} {ld.description}")
