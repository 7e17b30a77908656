"""Command line: ``medr2 ingest | search | ask | doc | index | train-classifier | demo | formats``.

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

    import psycopg

    from medr2.index.backend import BackendError
    from medr2.index.dense import EncoderError
    from medr2.index.splade import SpladeError

    return (EncoderError, SpladeError, BackendError, sqlite3.Error, psycopg.Error)


def _fail(msg: str, code: int = EXIT_FAIL) -> None:
    click.echo(f"error: {msg}", err=True)
    sys.exit(code)


# The named pipelines of medr2.pipelines.PIPELINES (listed here so the CLI loads without numpy;
# a test keeps the two equal).
PIPELINE_NAMES = ["direct", "direct_cot", "vanilla_rag", "+reformulator", "+reranker", "+cot", "+reformulator+reranker",
                  "+reformulator+cot", "+reranker+cot", "medr2", "kg", "llm_amt"]


def _load_config(path: Optional[str]) -> Optional[Config]:
    try:
        return Config.load(path) if path else None
    except ConfigError as e:
        _fail(str(e), EXIT_USAGE)


def _open(index: str, config: Optional[Config], writable: bool = False, create: bool = False):
    from medr2.index.backend import BackendError
    from medr2.index.index import Index

    try:
        return Index.open(index, config, create=create, writable=writable)
    except BackendError as e:
        _fail(str(e), EXIT_USAGE)


@click.group()
@click.version_option(package_name="medr2")
def main() -> None:
    """medr2: evidence-based medical question answering that shows its evidence."""


index_opt = click.option("--index", "index_dir", required=True, type=click.Path(file_okay=False),
                         help="Index directory.")
config_opt = click.option("--config", "config_path", type=click.Path(dir_okay=False, exists=True),
                          help="TOML config file (see medr2.config).")
# medr2.pipelines.ANSWER_MODES (a test keeps the two equal)
answer_mode_opt = click.option(
    "--answer-mode", type=click.Choice(["generate", "loglik", "loglik-cal"]), default="generate", show_default=True,
    help="loglik: pick the option with the highest log-likelihood (prefill only, no generation); loglik-cal: the "
         "same, calibrated against a content-free prompt.")


@main.command()
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
    config = _with_backend(config, backend, uri, store, store_uri)
    if workers is not None and workers < 1:
        _fail("--workers must be at least 1", EXIT_USAGE)
    idx = _open(index_dir, config, writable=True, create=True)
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
    from medr2.index.backend import BackendError
    from medr2.index.migrate import migrate_to_milvus

    out = out_dir or str(Path(src_dir).resolve()) + "-milvus"
    show = sys.stderr.isatty() if progress is None else progress
    try:
        n = migrate_to_milvus(Path(src_dir), target, Path(out), progress=show)
    except BackendError as e:
        _fail(str(e), EXIT_USAGE)
    click.echo(f"migrated {n} passages to {target}; the new index is {out} (search it with --index {out})")


def _parse_options(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in pairs:
        if "=" not in item:
            _fail(f"--option {item!r} must look like A=\"text of option A\"", EXIT_USAGE)
        k, v = item.split("=", 1)
        if k.strip().upper() in {x.upper() for x in out}:
            _fail(f"--option {k.strip()} is given twice", EXIT_USAGE)
        out[k.strip()] = v.strip()
    return out


def _fmt(v, nd: int = 2) -> str:
    return "-" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


def print_answer(res, explain: bool) -> None:
    """Human-readable answer, citations, evidence table and (with explain) the rounds."""
    by_id = {r.passage_id: r for r in res.evidence}
    click.echo(f"Q: {res.question}")
    for k, v in res.options.items():
        click.echo(f"   {k}. {v}")
    c = res.classification
    if c:
        click.echo(f"EBM category: {c.get('ebm_category')} | question type: {c.get('question_type')} "
                   f"({c.get('method')})")
    if res.reformulation:
        click.echo(f"Query: {res.reformulation.get('query')} ({res.reformulation.get('method')})")
    flag = "  [INSUFFICIENT EVIDENCE]" if res.insufficient else ""
    click.echo(f"\nAnswer ({res.pipeline}, {res.method}): {res.answer}{flag}")
    if res.rationale:
        click.echo(f"Rationale: {res.rationale}")
    if res.citations:
        click.echo("Citations:")
        for pid in res.citations:
            r = by_id.get(pid)
            if r is not None:
                click.echo(f"  [{r.n}] {pid} {r.title} ({r.source_type.value}, level {r.level} {r.design})")
    for n in res.notes:
        click.echo(f"note: {n}")
    if res.evidence:
        click.echo("\nEvidence (n, passage, source, level/design, doc type, f_h, f_g, f_u, F, status):")
        rows = res.evidence if explain else [r for r in res.evidence if r.kept or r.reason.startswith("dropped")]
        for r in rows:
            click.echo(f"  {_fmt(r.n):>2} {r.passage_id} {r.source_type.value:<9} {r.level}/{r.design:<28} "
                       f"{_fmt(r.doc_type):<16} {r.f_h} {_fmt(r.f_g)} {_fmt(r.f_u)} {_fmt(r.F)}  "
                       f"{'kept' if r.kept else r.reason}  {r.title[:50]}")
    sg = res.subgraph
    if sg:
        links = ", ".join(f"{lk['name']} ({lk['how']} {lk['confidence']})" for lk in sg.get("links", []))
        click.echo(f"\nLinked entities: {links or 'none'}")
        click.echo("Knowledge-graph statements (label, tier, Q, triple, passages):")
        for t in sg.get("triples", []):
            click.echo(f"  {t['label']:<4} {t['tier']:<11} {_fmt(t['q'])} {t['head']} -{t['relation']}-> {t['tail']}"
                       f"  [{' '.join(t['text_ids'][:3])}{' ...' if len(t['text_ids']) > 3 else ''}]  {t['triple_id']}")
        for t in sg.get("withheld", []):
            click.echo(f"  withheld (exploratory, high-risk): {t['head']} -{t['relation']}-> {t['tail']} {t['triple_id']}")
    for cf in res.conflicts:
        if cf.get("kind") == "triple":
            click.echo(f"conflict (graph): {cf['head']} {' vs '.join(cf['relations'])} {cf['tail']} (Q {cf['q']})"
                       + (f" -> prefer {cf['preferred']}" if cf.get("preferred") else " -> equal quality"))
            continue
        click.echo(f"conflict: {cf['a']} vs {cf['b']}: {cf['reason'][:200]}"
                   + (f" -> dropped {cf['dropped']}" if cf.get("dropped") else " -> both kept (equal level)"))
    if explain:
        for rd in res.rounds:
            click.echo(f"\nround {rd.round}: query: {rd.query[:300]}")
            click.echo(f"  coarse: {' '.join(rd.coarse_ids)}")
            click.echo(f"  context: {' '.join(rd.context_ids)}")
            click.echo(f"  answer: {rd.answer[:200]} | Acc={_fmt(rd.acc)} mu={_fmt(rd.mu, 4)} "
                       f"Acc/mu={_fmt(rd.ratio)} stop={rd.stop} {rd.stop_reason}")
        u = res.usage
        click.echo(f"\nusage: {u.get('calls')} model calls, {u.get('prompt_tokens')} prompt + "
                   f"{u.get('completion_tokens')} completion tokens, {u.get('wall_seconds')} s "
                   f"(outside the LLM: {_fmt(u.get('outside_llm_share'))})")
        for name, st in u.get("stages", {}).items():
            click.echo(f"  {name:<15} calls {st['calls']:>3} (+{st['cached_calls']} cached) "
                       f"tokens {st['prompt_tokens']:>6}+{st['completion_tokens']:<5} "
                       f"llm {st['llm_seconds']:.2f}s wall {st['seconds']:.2f}s")


@main.command()
@click.argument("question")
@index_opt
@config_opt
@click.option("--option", "option_pairs", multiple=True, metavar='A="TEXT"',
              help="A multiple-choice option (repeat for each).")
@click.option("--llm", "llm_spec", help="Generator: local (bundled Qwen2.5-1.5B), none, a .gguf path, "
                                        "http(s)://HOST/v1, hf:PATH (default: llm.generator).")
@click.option("--scorer", help="Proxy LM for usefulness (default: llm.scorer, bundled SmolLM2-135M).")
@click.option("--pipeline", "pipeline_name", default="medr2", show_default=True,
              type=click.Choice(PIPELINE_NAMES))
@click.option("--kg", "use_kg", is_flag=True, help="Graph mode (same as --pipeline kg): quality-ranked subgraph, "
                                                   "its passages and the dense top-5, tier-conditioned prompt.")
@answer_mode_opt
@click.option("--rounds", type=click.IntRange(1, 20), help="Maximum retrieval rounds T (default: assess.max_rounds).")
@click.option("--explain", is_flag=True, help="Show every round, all coarse passages and per-stage usage.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (answer, rationale, citations, "
                                                      "evidence, rounds, usage, ...).")
def ask(question, index_dir, config_path, option_pairs, llm_spec, scorer, pipeline_name, use_kg, answer_mode, rounds,
        explain, as_json):
    """Answer a question from the index with cited, appraised evidence (Med-R2, or the graph with --kg)."""
    if use_kg:
        pipeline_name = "kg"
    from medr2.llm.base import LLMError
    from medr2.pipelines import Engine, Pipeline
    from medr2.search.hybrid import QueryError

    config = _load_config(config_path)
    options = _parse_options(option_pairs)
    from medr2.index.postgres import is_index_dir

    if not is_index_dir(index_dir):
        _fail(f"{index_dir} is not a medr2 index; build one with `medr2 ingest PATH --index {index_dir}`", EXIT_USAGE)
    try:
        engine = Engine.open(index_dir, config, generator=llm_spec, scorer=scorer)
    except LLMError as e:
        _fail(f"{e}\n(use --llm none for the deterministic extractive path without a model)")
    except _model_errors() as e:
        _fail(str(e))
    except (OSError, RuntimeError, ImportError, ValueError) as e:  # classifier artefact, cross-encoder, ...
        _fail(f"{type(e).__name__}: {e}")
    try:
        res = Pipeline(engine, pipeline_name, rounds, answer_mode).run(question, options)
    except QueryError as e:
        _fail(str(e), EXIT_USAGE)
    except LLMError as e:
        _fail(str(e))
    except _model_errors() as e:
        _fail(str(e))
    except (OSError, RuntimeError, ImportError, ValueError) as e:  # terminology files, settings, ...
        _fail(f"{type(e).__name__}: {e}", EXIT_USAGE if isinstance(e, ValueError) else EXIT_FAIL)
    finally:
        engine.close()
    if as_json:
        click.echo(res.model_dump_json(indent=2))
    else:
        print_answer(res, explain)


@main.command("train-classifier")
@click.option("--medquad", required=True, type=click.Path(dir_okay=False),
              help="MedQuAD as JSON Lines (question, qtype, doc_id).")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Artefact to write (.npz); point formulate.classifier_path at it.")
@click.option("--test-fraction", default=0.2, show_default=True, type=click.FloatRange(0.05, 0.5))
def train_classifier(medquad, out_path, test_fraction):
    """Train the offline EBM-category classifier and report its held-out accuracy."""
    from medr2.formulate.train import TrainingDataError, train_ebm_classifier

    try:
        model, report = train_ebm_classifier(medquad, test_fraction)
    except TrainingDataError as e:
        _fail(str(e), EXIT_USAGE)
    model.save(out_path)
    click.echo(json.dumps(report, indent=2))
    click.echo(f"wrote {out_path}")


@main.group("eval")
def eval_group() -> None:
    """Evaluation: score predictions (MIRAGE's stored ones included)."""


@eval_group.command("run")
@click.option("--dataset", "dataset_spec", required=True, metavar="NAME[:N]",
              help="A MIRAGE set (mmlu, medqa, medmcqa, pubmedqa, bioasq; needs --benchmark) or a benchmark file "
                   "(XMedBench .jsonl, MMLU .csv, PubMedQA ori_pqal.json); :N takes a fixed seeded subset.")
@click.option("--benchmark", type=click.Path(dir_okay=False, exists=True), help="MIRAGE benchmark.json.")
@click.option("--method", default="medr2", show_default=True,
              type=click.Choice(PIPELINE_NAMES))
@index_opt
@config_opt
@click.option("--llm", "llm_spec", help="Generator (as in ask; default llm.generator).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Run directory.")
@click.option("--limit", type=int, help="Only the first N questions of the (sub)set, in file order.")
@click.option("--shard", help="i/n: answer every n-th question starting at i (parallel runs).")
@click.option("--seed", default=0, show_default=True, help="Seed of the :N subset and of the answering order "
                                                              "(a seeded shuffle, so a stopped run has answered a random sample).")
@answer_mode_opt
@click.option("--allow-own-source", is_flag=True,
              help="Let retrieval return a question's own source document (its PMID, e.g. the PubMedQA abstract); "
                   "excluded by default, as in MIRAGE's PubMedQA*.")
@click.option("--progress/--no-progress", default=None, help="Progress bar with ETA (default: on a terminal).")
def eval_run(dataset_spec, benchmark, method, index_dir, config_path, llm_spec, out_dir, limit, shard, seed,
             answer_mode, allow_own_source, progress):
    """Answer a benchmark with a pipeline; resumable (rerun to continue), cached, shardable."""
    from medr2.eval.datasets import DatasetError
    from medr2.eval.runner import (RunBusy, RunMismatch, answer_order, in_shard, load_questions, own_sources,
                                   parse_dataset_spec, parse_shard, run, safe_name, subset)
    from medr2.llm.base import LLMError, LLMOutputError
    from medr2.pipelines import Engine, Pipeline
    from medr2.search.hybrid import QueryError

    config = _load_config(config_path)
    try:
        name, n = parse_dataset_spec(dataset_spec)
        sh = parse_shard(shard)
        qs = subset(load_questions(name, benchmark), n, seed)
    except DatasetError as e:
        _fail(str(e), EXIT_USAGE)
    qs = answer_order([q for i, q in enumerate(qs) if in_shard(i, sh)][: limit if limit else None], seed)
    try:
        engine = Engine.open(index_dir, config, generator=llm_spec)
    except LLMError as e:
        _fail(str(e))
    except _model_errors() as e:
        _fail(str(e))
    pipe = Pipeline(engine, method, answer_mode=answer_mode)
    model = safe_name(getattr(engine.generator, "name", None) or "none")

    def answer(q):
        try:
            res = pipe.run(q.question, q.options, frozenset() if allow_own_source else own_sources(q))
        except (QueryError, LLMError, ValueError) as e:
            # only a call that could not be made is retried on resume; a refused question or a model
            # that never answered in the form asked gives the same again, so it is a wrong answer
            transient = isinstance(e, LLMError) and not isinstance(e, LLMOutputError)
            return {"answer": "", "rationale": f"not answered: {e}", "insufficient": True, "method": "rule",
                    "error": str(e) if transient else None}
        return {"answer": res.answer, "rationale": res.rationale, "citations": res.citations,
                "insufficient": res.insufficient, "usage": res.usage, "method": res.method,
                "error": res.answer if res.method == "error" else None,  # "...the generator failed (why)"
                "context": [{"passage_id": r.passage_id, "doc_id": r.doc_id} for r in res.evidence if r.kept]}

    dataset_dir = safe_name(qs[0].dataset if qs else Path(name).stem)
    out = Path(out_dir) / dataset_dir / safe_name(method + ("" if answer_mode == "generate" else "+" + answer_mode)) / model
    manifest = {"dataset": dataset_spec, "subset_seed": seed, "shard": shard, "method": method,
                "answer_mode": answer_mode, "own_source_excluded": not allow_own_source,
                "models": engine.model_names(), "index": str(Path(index_dir).resolve()),
                "corpus": engine.index.stats().get("by_source_type"), "config": engine.config.model_dump(mode="json")}

    try:
        totals = run(qs, answer, out, manifest, progress=progress if progress is not None else sys.stderr.isatty())
    except (RunMismatch, RunBusy) as e:
        _fail(str(e), EXIT_USAGE)
    finally:
        engine.close()
    click.echo(json.dumps({"out": str(out), **totals}, indent=2))


@eval_group.command("trust")
@click.option("--questions", required=True, type=click.Path(dir_okay=False, exists=True),
              help="Required-knowledge questions (JSON Lines: id, ngc_id, question, required[].text), "
                   "e.g. bench/data/ngc_questions.jsonl.")
@index_opt
@config_opt
@click.option("--mode", "modes", multiple=True, type=click.Choice(["no_rag", "passage", "full", "oracle_kg"]),
              help="Modes to compare (repeatable; default all four). full needs `medr2 kg build`.")
@click.option("--llm", "llm_spec", help="Generator (as in ask; default llm.generator).")
@click.option("--limit", type=int, help="Only the first N questions.")
@click.option("--ragas", "with_ragas", is_flag=True, help="Add RAGAS-style metrics (entity recall and answer "
                                                          "similarity always; judge metrics with --judge).")
@click.option("--judge", "judge_spec", help="LLM judge for faithfulness, context precision and recall.")
@click.option("--judge-runs", default=1, show_default=True, type=click.IntRange(1, 10),
              help="Repeated judge runs (seeds 0..N-1, temperature 0.7) to measure the judge's variance.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False))
def eval_trust(questions, index_dir, config_path, modes, llm_spec, limit, with_ragas, judge_spec, judge_runs, out_dir):
    """Trust metrics (omission, conflicts, unsupported claims, invalid citations, grounded precision) per mode."""
    from medr2.eval.trust_run import TrustError, load_trust_questions, run_trust
    from medr2.llm.base import LLMError
    from medr2.pipelines import Engine

    config = _load_config(config_path)
    try:
        qs = load_trust_questions(questions)[:limit] if limit else load_trust_questions(questions)
    except TrustError as e:
        _fail(str(e), EXIT_USAGE)
    try:
        engine = Engine.open(index_dir, config, generator=llm_spec)
    except (LLMError, ValueError, OSError) as e:
        _fail(str(e), EXIT_USAGE)
    except _model_errors() as e:
        _fail(str(e))
    ragas = None
    try:
        if with_ragas or judge_spec:
            from medr2.kg.build import library_for
            from medr2.llm.factory import load_llm

            judge = load_llm(judge_spec, engine.config.llm, engine.cache) if judge_spec else None
            ragas = {"judge": judge, "runs": judge_runs, "library": library_for(engine.config.kg),
                     "encoder": engine.index.encoder}
        summary = run_trust(engine, qs, list(modes) or ["no_rag", "passage", "full", "oracle_kg"], Path(out_dir),
                            lambda msg: click.echo(msg, err=True), ragas)  # a line per answer (minutes apart)
    except (TrustError, ValueError, LLMError) as e:
        _fail(str(e), EXIT_USAGE)
    finally:
        engine.close()
    for mode, r in summary.items():
        if "ragas" in r:
            click.echo(f"{mode} RAGAS: " + ", ".join(f"{k} {_fmt(v)}" for k, v in r["ragas"].items()))
    click.echo("| mode | n | omission | conflict rate | unsupported claims | invalid citations | grounded precision | "
               "insufficient | s/question |")
    click.echo("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for mode, r in summary.items():
        click.echo(f"| {mode} | {r['n']} | {_fmt(r['omission'])} | {_fmt(r['conflict_rate'])} | {_fmt(r['unsupported'])} "
                   f"| {_fmt(r['invalid_citation'])} | {_fmt(r['grounded_precision'])} | {_fmt(r['insufficient_rate'])} "
                   f"| {_fmt(r['seconds'])} |")


@eval_group.command("report")
@click.argument("run_dirs", nargs=-1, type=click.Path(file_okay=False, exists=True))
@click.option("--trust", "trust_dirs", multiple=True, type=click.Path(file_okay=False, exists=True),
              help="Output directory of `medr2 eval trust` (repeatable).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False))
def eval_report(run_dirs, trust_dirs, out_dir):
    """Markdown tables (Table 2 and Table 10 layouts, trust metrics) and PNG plots of runs."""
    from medr2.eval.report import write_report

    if not run_dirs and not trust_dirs:
        _fail("give at least one RUN_DIR (or --trust DIR)", EXIT_USAGE)
    try:
        f = write_report([Path(d) for d in run_dirs], Path(out_dir), [Path(d) for d in trust_dirs])
    except (ValueError, FileNotFoundError) as e:
        _fail(str(e), EXIT_USAGE)
    click.echo(f"wrote {f}")


@eval_group.command("score")
@click.option("--mirage", "mirage_dir", type=click.Path(file_okay=False, exists=True),
              help="A MIRAGE prediction directory (prediction/<dataset>/<setting>/OpenAI/<model>/...).")
@click.option("--benchmark", type=click.Path(dir_okay=False, exists=True),
              help="MIRAGE benchmark.json (gold answers; with --mirage).")
@click.option("--run", "run_dir", type=click.Path(file_okay=False, exists=True), help="A medr2 eval run directory.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of rows.")
def eval_score(mirage_dir, benchmark, run_dir, as_json):
    """Accuracy and std (percent): MIRAGE's stored predictions with MIRAGE's own extraction rules,
    or a medr2 run directory."""
    if bool(mirage_dir) == bool(run_dir):
        _fail("give either --mirage DIR --benchmark FILE or --run DIR", EXIT_USAGE)
    if run_dir:
        from medr2.eval.runner import score_run

        rows = score_run(Path(run_dir))
        key = "method"
    else:
        from medr2.eval.mirage import score_predictions

        if not benchmark:
            _fail("--mirage needs --benchmark benchmark.json", EXIT_USAGE)
        try:
            bench = json.loads(Path(benchmark).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            _fail(f"{benchmark} is not MIRAGE's benchmark.json ({e})", EXIT_USAGE)
        rows = score_predictions(mirage_dir, bench)
        key = "setting"
    if not rows:
        _fail(f"no prediction files under {mirage_dir or run_dir}", EXIT_USAGE)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    pub = None
    if mirage_dir:
        from medr2.eval.mirage import FULL_SIZES, published

        pub = {id(r): published(r) for r in rows}
    click.echo(f"{'dataset':<14} {key:<24} {'model':<28} {'n':>5} {'acc %':>7} {'std':>6}"
               + (f" {'missing':>7}" if mirage_dir else f" {'unparsed':>8} {'abstain':>7} {'errors':>6}")
               + ("  published (full set)" if pub else ""))
    for r in rows:
        extra = ""
        if pub and pub[id(r)] is not None:
            extra = f"  {pub[id(r)]:.2f} (n = {FULL_SIZES[r['dataset']]})"
        counts = f" {r['missing']:>7}" if mirage_dir else \
            f" {r.get('unparsed', 0):>8} {r.get('insufficient', 0):>7} {r.get('errors', 0):>6}"
        click.echo(f"{r['dataset']:<14} {r[key]:<24} {r['model'][:28]:<28} {r['n']:>5} {r['accuracy']:>7.2f} "
                   f"{r['std']:>6.2f}{counts}{extra}")
    _print_averages(rows, key)


def _print_averages(rows: list[dict], key: str) -> None:
    """MIRAGE's average: the unweighted mean over datasets, per method (or setting) and model,
    over the datasets that one ran on."""
    from medr2.eval.scoring import macro_average

    avg = macro_average(rows, key)
    if not avg:
        return
    click.echo("")
    for (k, model), (acc, n_sets) in avg.items():
        sets = f"{n_sets} dataset" + ("s" if n_sets > 1 else "")
        click.echo(f"{'Avg':<14} {k:<24} {model[:28]:<28} {n_sets:>5} {acc:>7.2f}  (mean over {sets})")


@main.command()
def formats():
    """List the loaders and the file types they read."""
    from medr2.ingest.loaders.base import loaders

    for name, ld in sorted(loaders().items()):
        click.echo(f"{name:<12} {' '.join(ld.suffixes) or '(by content or --format)':<22} {ld.description}")


@main.command()
@click.option("--index", "index_dir", default=".demo/index", show_default=True, type=click.Path(file_okay=False))
@click.option("--k", default=3, show_default=True, help="Search hits shown per question.")
@click.option("--llm", "llm_spec", default="local", show_default=True,
              help="Generator for the answers: local (bundled Qwen2.5-1.5B), none (extractive), a .gguf, a URL; "
                   "'skip' only searches.")
def demo(index_dir, k, llm_spec):
    """Build the demo index from the bundled illustrative corpus, search it and answer its sample questions."""
    from medr2.demo import run_demo
    from medr2.llm.base import LLMError

    try:
        code = run_demo(Path(index_dir), k, "" if llm_spec == "skip" else llm_spec)
    except LLMError as e:
        _fail(f"{e}\n(`make models` installs the bundled generator; `medr2 demo --llm none` answers without it)")
    except _model_errors() as e:
        _fail(str(e))
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()


@main.command()
@index_opt
@config_opt
@click.option("--host", help="Address to listen on (default serve.host, 127.0.0.1).")
@click.option("--port", type=int, help="Port (default serve.port, 8000).")
@click.option("--llm", "llm_spec", help="Generator (local, none, a .gguf, http(s)://HOST/v1; default llm.generator).")
@click.option("--scorer", help="Proxy LM for usefulness (default llm.scorer).")
def serve(index_dir, config_path, host, port, llm_spec, scorer):
    """Run the HTTP API and the web page over an index (token for writes: $MEDR2_API_TOKEN)."""
    import logging

    import uvicorn

    from medr2.llm.base import LLMError
    from medr2.serve.app import create_app

    config = _load_config(config_path)
    try:
        app = create_app(index_dir, config, generator=llm_spec,
                         scorer=scorer)
    except FileNotFoundError as e:
        _fail(str(e), EXIT_USAGE)
    except LLMError as e:
        _fail(f"{e}\n(use --llm none to serve the deterministic extractive path)")
    except _model_errors() as e:
        _fail(str(e))
    sv = app.state.config.serve
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    click.echo(f"medr2 serving {index_dir} on http://{host or sv.host}:{port or sv.port}/ "
               f"(writes {'enabled' if __import__('os').environ.get(sv.token_env) else 'disabled: set ' + sv.token_env})")
    uvicorn.run(app, host=host or sv.host, port=port or sv.port, log_level="warning")


from medr2 import cli_kg  # noqa: E402,F401  (registers `medr2 kg ...`)
