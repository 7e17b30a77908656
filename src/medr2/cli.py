"""Command line: ``medr2 ingest | search | doc | index | demo | formats``.

Exit codes: 0 success, 1 failure, 2 bad usage or input, 3 partial ingestion (some files or
records could not be read; the rest was ingested).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import click

from medr2.config import Config, ConfigError

EXIT_FAIL, EXIT_USAGE, EXIT_PARTIAL = 1, 2, 3


def _model_errors() -> tuple[type[BaseException], ...]:
    """Errors that mean a model, the index or a setting cannot be used: a message, no traceback."""
    import sqlite3

    from medr2.index.dense import EncoderError
    from medr2.index.index import IndexError_
    from medr2.index.splade import SpladeError

    return (EncoderError, SpladeError, IndexError_, sqlite3.Error)


def _fail(msg: str, code: int = EXIT_FAIL) -> None:
    click.echo(f"error: {msg}", err=True)
    sys.exit(code)


def _load_config(path: Optional[str]) -> Optional[Config]:
    try:
        return Config.load(path) if path else None
    except ConfigError as e:
        _fail(str(e), EXIT_USAGE)


def _open(index: str, config: Optional[Config], writable: bool = False, create: bool = False):
    from medr2.index.index import Index, IndexError_

    try:
        return Index.open(index, config, create=create, writable=writable)
    except IndexError_ as e:
        _fail(str(e), EXIT_USAGE)


@click.group()
@click.version_option(package_name="medr2")
def main() -> None:
    """medr2: evidence-based medical question answering that shows its evidence."""


index_opt = click.option("--index", "index_dir", required=True, type=click.Path(file_okay=False),
                         help="Index directory.")
config_opt = click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True),
                          help="TOML config file (see medr2.config).")


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@index_opt
@config_opt
@click.option("--format", "fmt", help="Loader to use for every file (default: by file type and content).")
@click.option("--map", "mapping", multiple=True, metavar="FIELD=SOURCE",
              help="JSON/JSONL/CSV field mapping, e.g. --map text=abstract --map id=pmid.")
@click.option("--source-type", type=click.Choice(["paper", "entry", "book", "guideline", "other"]),
              help="Source type for records of generic formats that do not name one.")
@click.option("--force", is_flag=True, help="Re-read files even when unchanged.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: when stderr is a terminal).")
def ingest(paths, index_dir, config_path, fmt, mapping, source_type, force, as_json, progress):
    """Ingest files or directories into an index (created when missing)."""
    from medr2.ingest.loaders.base import LoadError, get_loader
    from medr2.ingest.loaders.records import check_mapping
    from medr2.ingest.pipeline import IngestAborted
    from medr2.ingest.pipeline import ingest as run

    config = _load_config(config_path)
    fields = {}
    for m in mapping:
        if "=" not in m:
            _fail(f"--map {m!r} must look like FIELD=SOURCE (e.g. text=abstract)", EXIT_USAGE)
        k, v = m.split("=", 1)
        fields[k.strip()] = v.strip()
    try:
        check_mapping(fields)
        if fmt:
            get_loader(fmt)
    except LoadError as e:
        _fail(str(e), EXIT_USAGE)
    idx = _open(index_dir, config, writable=True, create=True)
    # per-run options do not change what the index is bound to
    if fields:
        idx.config.ingest.json_fields.update(fields)
    if source_type:
        idx.config.ingest.source_type = source_type
    show = sys.stderr.isatty() if progress is None else progress
    try:
        report = run(idx, paths, fmt=fmt, force=force, progress=show)
    except KeyboardInterrupt:
        click.echo("interrupted: committed batches are kept; run the same command again to resume", err=True)
        sys.exit(130)
    except IngestAborted as e:
        _fail(str(e))
    except _model_errors() as e:
        _fail(f"{e}; committed batches are kept")
    finally:
        idx.close()
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2))
    else:
        for p in report.failed_files:
            click.echo(f"FAILED  {p.path}: {p.reason}", err=True)
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
        )
    sys.exit(report.exit_code)


def _print_hits(result) -> None:
    click.echo(f"query: {result.query}")
    for n, h in enumerate(result.hits, 1):
        s = h.scores
        parts = [f"fused={s['fused']:.3f}" if s.get("fused") is not None else ""]
        if s.get("dense") is not None:
            parts.append(f"dense={s['dense']:.3f}#{s['dense_rank']}")
        if s.get("sparse") is not None:
            parts.append(f"bm25={s['sparse']:.2f}#{s['sparse_rank']}")
        if s.get("splade") is not None:
            parts.append(f"splade={s['splade']:.2f}#{s['splade_rank']}")
        if s.get("rerank") is not None:
            parts.append(f"rerank={s['rerank']:.3f}")
        click.echo(f"\n{n:>2}. [{h.source_type.value}] {h.title}" + (f" ({h.year})" if h.year else ""))
        click.echo(f"    {h.passage_id}  doc={h.doc_id}  " + " ".join(p for p in parts if p))
        if h.heading_path:
            click.echo(f"    > {' > '.join(h.heading_path)}")
        text = " ".join(h.text.split())
        click.echo(f"    {text[:300]}{'...' if len(text) > 300 else ''}")


@main.command()
@click.argument("query")
@index_opt
@config_opt
@click.option("--k", default=10, show_default=True, help="Number of hits.")
@click.option("--json", "as_json", is_flag=True, help="Print {query, hits:[...]} as JSON.")
@click.option("--source-type", "source_types", multiple=True,
              type=click.Choice(["paper", "entry", "book", "guideline", "other"]), help="Only these source types.")
@click.option("--year-min", type=int)
@click.option("--year-max", type=int)
@click.option("--language", "languages", multiple=True, help="Only passages in these languages (en, zh).")
@click.option("--fusion", type=click.Choice(["union", "rrf"]), help="Override fusion.method.")
def search(query, index_dir, config_path, k, as_json, source_types, year_min, year_max, languages, fusion):
    """Hybrid search (dense + BM25, fused, coarse-reranked)."""
    from medr2.search.hybrid import Filters, HybridSearcher, QueryError

    config = _load_config(config_path)
    try:
        filters = Filters(list(source_types), year_min, year_max, list(languages))
    except QueryError as e:
        _fail(str(e), EXIT_USAGE)
    idx = _open(index_dir, config)
    try:
        result = HybridSearcher(idx).search(query, k=k, filters=filters, fusion=fusion)
    except QueryError as e:
        _fail(str(e), EXIT_USAGE)
    except _model_errors() as e:
        _fail(str(e))
    except (RuntimeError, ImportError) as e:  # e.g. a configured cross-encoder that cannot load
        _fail(str(e))
    finally:
        idx.close()
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        _print_hits(result)


@main.group()
def doc() -> None:
    """Inspect or remove documents."""


@doc.command("remove")
@click.argument("doc_ids", nargs=-1, required=True)
@index_opt
def doc_remove(doc_ids, index_dir):
    """Remove documents (and their passages, from every index)."""
    idx = _open(index_dir, None, writable=True)
    try:
        missing = [d for d in doc_ids if not idx.store.has_document(d)]
        present = [d for d in doc_ids if d not in missing]
        n = idx.remove_documents(present) if present else 0
    finally:
        idx.close()
    for d in missing:
        click.echo(f"not found: {d}", err=True)
    click.echo(f"removed {len(present)} document(s), {n} passage(s)")
    sys.exit(EXIT_USAGE if missing and not present else (EXIT_PARTIAL if missing else 0))


@doc.command("show")
@click.argument("doc_id")
@index_opt
@click.option("--json", "as_json", is_flag=True)
def doc_show(doc_id, index_dir, as_json):
    """Show a document's heading tree and passages."""
    idx = _open(index_dir, None)
    try:
        d = idx.store.get_document(doc_id)
        passages = idx.store.doc_passages(doc_id) if d else []
    finally:
        idx.close()
    if d is None:
        _fail(f"no document {doc_id!r} in {index_dir}", EXIT_USAGE)
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


@main.group("index")
def index_group() -> None:
    """Index maintenance."""


@index_group.command("stats")
@index_opt
@click.option("--json", "as_json", is_flag=True)
def index_stats(index_dir, as_json):
    """Documents, passages by source type, index sizes."""
    idx = _open(index_dir, None)
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
    click.echo(f"dense: {st['dense_model']} ({st['dense_dim']}-d)   segments: "
               + ", ".join(f"{s['kind']}:{s['live']}/{s['rows']}" for s in st["segments"]))
    d = st["disk_bytes"]
    click.echo(f"disk: store {d['store'] / 1e6:.1f} MB, segments {d['segments'] / 1e6:.1f} MB, total "
               f"{d['total'] / 1e6:.1f} MB   memory (segments): {st['memory_bytes'] / 1e6:.1f} MB")


@main.command()
def formats():
    """List the loaders and the file types they read."""
    from medr2.ingest.loaders.base import loaders

    for name, ld in sorted(loaders().items()):
        click.echo(f"{name:<12} {' '.join(ld.suffixes) or '(by content or --format)':<22} {ld.description}")


@main.command()
@click.option("--index", "index_dir", default=".demo/index", show_default=True, type=click.Path(file_okay=False))
@click.option("--k", default=3, show_default=True)
def demo(index_dir, k):
    """Build the demo index from the bundled illustrative corpus and answer its sample questions."""
    from medr2.demo import run_demo

    try:
        code = run_demo(Path(index_dir), k)
    except _model_errors() as e:
        _fail(str(e))
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
