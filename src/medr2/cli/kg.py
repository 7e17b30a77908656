"""``medr2 kg ...``: build the knowledge graph and its statistics, export it, edit its schema,
add solved cases for the personalized graph, export reasoning supervision. Looking at the graph
(show, triple, review, search) is :mod:`medr2.cli.kg_inspect`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from medr2.cli import kg_inspect
from medr2.cli.common import (EXIT_USAGE, config_opt, config_or_default, fail, index_llm, index_opt, load_config,
                              model_errors, open_graph, open_index)


@click.group("kg")
def kg_group() -> None:
    """Quality-aware knowledge graph: build, stats, show, review, export, schema, cases, search."""


for _command in kg_inspect.COMMANDS:
    kg_group.add_command(_command)


def _progress_cb(show: bool, label: str):
    if not show:
        return None, None
    from tqdm import tqdm

    bar = tqdm(desc=label, unit="doc", file=sys.stderr)

    def cb(i: int, n: int, what: str) -> None:
        bar.total = n
        bar.n = i
        bar.set_postfix_str(what[:30], refresh=False)
        bar.refresh()

    return cb, bar


@kg_group.command("build")
@index_opt
@config_opt
@click.option("--extractor", "extractors", multiple=True,
              type=click.Choice(["rules", "structured", "llm", "all"]),
              help="Extractors to run (repeatable; default kg.extractors: rules + structured; all = the three).")
@click.option("--llm", "llm_spec", help="Generator for the llm extractor (local, a .gguf, http(s)://HOST/v1, ...).")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a terminal).")
@click.option("--json", "as_json", is_flag=True)
def kg_build(index_dir, config_path, extractors, llm_spec, progress, as_json):
    """Extract triples from the index's documents, score and tier them (incremental)."""
    from medr2.kg.build import KGBuilder, library_for, make_extractors, sync_index
    from medr2.llm.base import LLMError

    cfg = config_or_default(config_path)
    names = list(extractors) or list(cfg.kg.extractors)
    if "all" in names:
        names = ["rules", "structured", "llm"]
    idx = open_index(index_dir, cfg)
    kg = open_graph(index_dir)
    llm = None
    try:
        if "llm" in names:
            llm = index_llm(llm_spec or idx.config.llm.generator, idx, index_dir)
            if llm is None:
                fail("the llm extractor needs a generator: pass --llm (e.g. local or http://HOST/v1)", EXIT_USAGE)
        library = library_for(cfg.kg)
        builder = KGBuilder(kg, library, make_extractors(names, library, llm), cfg.kg)
        cb, bar = _progress_cb(sys.stderr.isatty() if progress is None else progress, "kg build")
        report = sync_index(idx.store, builder, cb)
        if bar is not None:
            bar.close()
        report["extractors"] = names
        report["llm_failures"] = sum(getattr(e, "failures", 0) for e in builder.extractors)
        report["counts"] = kg.counts()
    except (LLMError, FileNotFoundError, ValueError) as e:
        fail(str(e), EXIT_USAGE)
    except model_errors() as e:
        fail(str(e))
    finally:
        idx.close()
        kg.close()
    if as_json:
        click.echo(json.dumps(report, indent=2, default=list))
        return
    c = report["counts"]
    click.echo(f"documents: +{report['documents_added']} -{report['documents_removed']} "
               f"({report['passages']} passages, {report['passages_per_s'] or '-'} passages/s); "
               f"candidates {report['candidates']}; triples recomputed {report['triples_recomputed']} "
               f"in {report['quality_seconds']} s")
    click.echo(f"graph: {c['triples']} triples, {c['entities']} entities, tiers {c['tiers']}")
    if report["llm_failures"]:
        click.echo(f"note: {report['llm_failures']} passage(s) got no valid JSON from the LLM extractor", err=True)


@kg_group.command("stats")
@index_opt
@click.option("--json", "as_json", is_flag=True)
def kg_stats(index_dir, as_json):
    """Counts: triples, entities, tiers, relations, extractors, reviews, macro nodes, cases."""
    kg = open_graph(index_dir)
    try:
        c = kg.counts()
    finally:
        kg.close()
    if as_json:
        click.echo(json.dumps(c, indent=2))
        return
    for k, v in c.items():
        click.echo(f"{k}: {v}")


@kg_group.command("export")
@index_opt
@click.option("--format", "fmt", required=True, type=click.Choice(["jsonl", "graphml", "csv"]))
@click.option("--out", "out_path", required=True, type=click.Path(), help="File (jsonl, graphml) or directory (csv).")
def kg_export(index_dir, fmt, out_path):
    """Export triples with quality and TextIDs: JSON Lines, GraphML, or Neo4j import CSV."""
    from medr2.kg.export import export

    kg = open_graph(index_dir)
    try:
        n = export(kg, fmt, out_path)
    except OSError as e:
        fail(f"cannot write {out_path}: {e}")
    finally:
        kg.close()
    click.echo(f"wrote {n} triple(s) to {out_path}")


@kg_group.command("schema")
@index_opt
@config_opt
@click.option("--export", "export_path", type=click.Path(dir_okay=False), help="Write the schema as JSON to edit.")
@click.option("--import", "import_path", type=click.Path(dir_okay=False, exists=True),
              help="Apply an edited schema JSON (relations become 'edited', synonyms 'confirmed'); rescores all.")
def kg_schema(index_dir, config_path, export_path, import_path):
    """Review and edit the schema: domain/range constraints, relation synonyms, inverse pairs."""
    from medr2.kg.build import QualityModel, seed_schema, stored_config

    given = load_config(config_path)
    kg = open_graph(index_dir)
    try:
        seed_schema(kg)
        kcfg = stored_config(kg, given.kg if given else None)
        if import_path:
            try:
                data = json.loads(Path(import_path).read_text(encoding="utf-8"))
                rels = data.get("relations", [])
                syns = data.get("relation_synonyms", {})
                for r in rels:
                    if not {"relation", "domain", "range"} <= set(r):
                        raise ValueError(f"relation entry without relation/domain/range: {r}")
            except (json.JSONDecodeError, ValueError, AttributeError) as e:
                fail(f"{import_path}: not a schema file ({e}); export one with --export first", EXIT_USAGE)
            current = {r["relation"]: r for r in kg.schema_rows()}
            with kg.transaction():
                for r in rels:
                    old = current.get(r["relation"])
                    if old and old["domain"] == r["domain"] and old["range"] == r["range"] \
                            and old["symmetric"] == bool(r.get("symmetric", old["symmetric"])):
                        continue
                    kg.put_schema({**(old or {}), **r, "source": "edited"})
                for surface, v in syns.items():
                    kg.put_relation_synonym(surface, v["relation"], v.get("score", 1.0), "confirmed",
                                            v.get("evidence", {}))
                n = QualityModel(kg, kcfg).recompute(kg.all_triple_ids())
            click.echo(f"schema applied; {n} triple(s) rescored")
        data = {"relations": kg.schema_rows(), "relation_synonyms": kg.relation_synonyms(),
                "inverse_pairs": kg.inverse_pairs()}
    finally:
        kg.close()
    if export_path:
        Path(export_path).write_text(json.dumps(data, indent=2, ensure_ascii=False), encoding="utf-8")
        click.echo(f"wrote {export_path}")
    elif not import_path:
        for r in data["relations"]:
            click.echo(f"{r['relation']:<24} {','.join(r['domain']) or '-':<40} -> {','.join(r['range']) or '-':<30} "
                       f"{r['source']}")
        for s, v in data["relation_synonyms"].items():
            click.echo(f"synonym: {s} -> {v['relation']} ({v['status']}, {v['score']})")


@kg_group.command("cases")
@click.argument("case_file", type=click.Path(dir_okay=False))
@index_opt
@config_opt
@click.option("--format", "fmt", default="auto", type=click.Choice(["auto", "jsonl", "medmcqa", "tcmbench"]),
              show_default=True, help="tcmbench: TCM cases read as finding -> syndrome -> therapy -> formula "
                                      "paths linked to the GB/T 16751 entries the index holds (auto-detected).")
@click.option("--limit", type=int, help="At most this many cases.")
@click.option("--llm", "llm_spec", help="Decompose with this generator (default: the deterministic extractor).")
@click.option("--progress/--no-progress", default=None)
def kg_cases(case_file, index_dir, config_path, fmt, limit, llm_spec, progress):
    """Personalized graph from solved cases (question, answer, explanation); resumable."""
    from medr2.ingest.loaders.tcmbench import is_tcmbench

    if fmt == "tcmbench" or (fmt == "auto" and Path(case_file).suffix == ".json" and is_tcmbench(Path(case_file))):
        return _tcm_cases(case_file, index_dir, config_path, limit, progress, llm_spec)
    from medr2.kg.build import library_for
    from medr2.kg.extract.rules import RuleExtractor
    from medr2.kg.personalized import CaseGraphBuilder, load_cases
    from medr2.llm.base import LLMError

    cfg = config_or_default(config_path)
    idx = open_index(index_dir, cfg)
    kg = open_graph(index_dir)
    try:
        llm = None
        if llm_spec:
            llm = index_llm(llm_spec, idx, index_dir)
        b = CaseGraphBuilder(kg, RuleExtractor(library_for(cfg.kg)), idx.encoder, llm)

        def text_of(tid: str) -> str:
            r = idx.store.rowid_of(tid)
            return idx.store.passages([r])[r]["text"] if r is not None else ""

        cases = list(load_cases(case_file, fmt, limit))
        show = sys.stderr.isatty() if progress is None else progress
        done = skipped = 0
        it = cases
        if show:
            from tqdm import tqdm

            it = tqdm(cases, desc="cases", unit="case", file=sys.stderr)
        for c in it:
            if kg.has_case(c["case_id"]):
                skipped += 1
                continue
            b.add_case(c, text_of)
            done += 1
    except (FileNotFoundError, ValueError, LLMError) as e:
        fail(str(e), EXIT_USAGE)
    finally:
        idx.close()
        kg.close()
    click.echo(f"cases: {done} added, {skipped} already present; {b.failures} LLM failure(s)")


@kg_group.command("export-reasoning")
@index_opt
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False))
@click.option("--format", "fmt", default="sharegpt", type=click.Choice(["sharegpt", "alpaca"]), show_default=True)
def kg_export_reasoning(index_dir, out_path, fmt):
    """Reasoning supervision (question -> reasoning, question -> triple chain) for LLaMA-Factory."""
    from medr2.kg.personalized import export_reasoning

    kg = open_graph(index_dir)
    try:
        n = export_reasoning(kg, out_path, fmt)
    finally:
        kg.close()
    click.echo(f"wrote {n} record(s) to {out_path}")


def _tcm_cases(case_file, index_dir, config_path, limit, progress, llm_spec=None):
    """TCMBench items as solved TCM cases (medr2.kg.tcm): the paths are read without a model; with
    ``--llm`` the model writes the reasoning of a case that has no analysis, from its questions,
    answers and the definitions its path links to (TCM-DiffRAG's reasoning of solved cases)."""
    from medr2.ingest.loaders.base import LoadError
    from medr2.ingest.loaders.tcmbench import grouped, read_tcmbench
    from medr2.kg.prompts import reasoning_messages
    from medr2.kg.tcm import TermIndex, tcm_case
    from medr2.llm.base import LLMError, stage

    cfg = config_or_default(config_path)
    idx = open_index(index_dir, cfg)
    kg = open_graph(index_dir)
    done = skipped = linked = written = failures = 0
    try:
        llm = index_llm(llm_spec, idx, index_dir) if llm_spec else None
        terms = TermIndex.of_store(idx.store)
        skipped_items: list[str] = []
        groups = list(grouped(read_tcmbench(case_file, skipped_items)))[:limit]
        show = sys.stderr.isatty() if progress is None else progress
        it = groups
        if show:
            from tqdm import tqdm

            it = tqdm(groups, desc="cases", unit="case", file=sys.stderr)
        for g in it:  # one transaction per case: a stopped run keeps what it wrote and resumes
            case, triples, support = tcm_case(g, terms)
            if kg.has_case(case["case_id"]):
                skipped += 1
                continue
            if llm is not None and not case["reasoning"]:
                texts = [idx.store.passages([r])[r]["text"] for r in
                         (idx.store.rowid_of(t) for t, _ in support) if r is not None]
                try:
                    with stage("kg_reasoning"):
                        out = llm.chat(reasoning_messages(case["question"], case["answer"], texts),
                                       max_tokens=300, temperature=0.0, seed=0)
                    case["reasoning"], case["method"] = out["text"].strip(), "tcm-rules+llm_reasoning"
                    written += 1
                except LLMError:
                    failures += 1
            with kg.transaction():
                kg.put_case(case, triples, support)
            done += 1
            linked += bool(support)
    except (FileNotFoundError, LoadError, ValueError) as e:
        fail(str(e), EXIT_USAGE)
    finally:
        idx.close()
        kg.close()
    for msg in skipped_items:
        click.echo(f"warning: {msg}", err=True)
    if not len(terms):
        click.echo("warning: the index holds no GB/T 16751 entries (ingest the standard's text first); the cases' "
                   "syndromes, therapies and formulas are not linked to definitions", err=True)
    click.echo(f"cases: {done} added ({linked} linked to GB/T 16751 entries), {skipped} already present"
               + (f"; reasoning written by the model for {written}, {failures} LLM failure(s)" if llm_spec else ""))
