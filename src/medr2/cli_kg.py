"""``medr2 kg ...``: build, inspect, review, export the knowledge graph; solved cases for the
personalized graph; graph search."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import click

from medr2.cli import EXIT_FAIL, EXIT_USAGE, _fail, _load_config, _model_errors, _open, config_opt, index_opt, main


@main.group("kg")
def kg_group() -> None:
    """Quality-aware knowledge graph: build, stats, show, review, export, schema, cases, search."""


def _kg(index_dir: str):
    from medr2.index.backend import BackendError
    from medr2.kg.build import open_kg

    try:
        return open_kg(index_dir)
    except (FileNotFoundError, BackendError) as e:  # not an index; a bad backend.json
        _fail(str(e), EXIT_USAGE)
    except ConnectionError as e:  # the PostgreSQL server of backend.json cannot be reached
        _fail(str(e), EXIT_FAIL)


def _llm(spec: str, idx, index_dir: str):
    """A generator from a spec, with the index's model settings and call cache."""
    from medr2.llm.factory import load_llm, open_cache

    return load_llm(spec, idx.config.llm, open_cache(idx.config.llm, index_dir))


def _cfg(config_path: Optional[str]):
    from medr2.config import Config

    return _load_config(config_path) or Config()


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

    cfg = _cfg(config_path)
    names = list(extractors) or list(cfg.kg.extractors)
    if "all" in names:
        names = ["rules", "structured", "llm"]
    idx = _open(index_dir, cfg)
    kg = _kg(index_dir)
    llm = None
    try:
        if "llm" in names:
            llm = _llm(llm_spec or idx.config.llm.generator, idx, index_dir)
            if llm is None:
                _fail("the llm extractor needs a generator: pass --llm (e.g. local or http://HOST/v1)", EXIT_USAGE)
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
        _fail(str(e), EXIT_USAGE)
    except _model_errors() as e:
        _fail(str(e))
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
    kg = _kg(index_dir)
    try:
        c = kg.counts()
    finally:
        kg.close()
    if as_json:
        click.echo(json.dumps(c, indent=2))
        return
    for k, v in c.items():
        click.echo(f"{k}: {v}")


def _triple_view(kg, t: dict) -> dict:
    ents = kg.entities([t["head_id"], t["tail_id"]])
    return {**t, "head": ents.get(t["head_id"], {}).get("name", t["head_id"]),
            "tail": ents.get(t["tail_id"], {}).get("name", t["tail_id"]),
            "head_type": ents.get(t["head_id"], {}).get("type"), "tail_type": ents.get(t["tail_id"], {}).get("type")}


@kg_group.command("show")
@click.argument("entity")
@index_opt
@config_opt
@click.option("--limit", default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def kg_show(entity, index_dir, config_path, limit, as_json):
    """Triples around an entity (name, synonym or id), best quality first, with provenance."""
    from medr2.kg.build import library_for
    from medr2.search.graph import GraphSearcher

    cfg = _cfg(config_path)
    kg = _kg(index_dir)
    try:
        if kg.entity(entity):
            ids = [entity]
            links = [{"entity_id": entity, "how": "id"}]
        else:
            gs = GraphSearcher(kg, library_for(cfg.kg), cfg)
            found = gs.link(entity)
            ids = [lk.entity_id for lk in found]
            links = [{"entity_id": lk.entity_id, "name": lk.name, "how": lk.how} for lk in found]
        triples = sorted(kg.triples_of_entities(ids), key=lambda t: -(t["q"] or 0))[:limit]
        out = [_triple_view(kg, t) | {"text_ids": kg.text_ids(t["triple_id"])} for t in triples]
        titles = kg.macro_of_entity(ids[0], 10) if ids else []
    finally:
        kg.close()
    if not ids:
        _fail(f"no entity of the graph matches {entity!r}", EXIT_USAGE)
    if as_json:
        click.echo(json.dumps({"links": links, "triples": out, "macro": titles}, indent=2, ensure_ascii=False))
        return
    click.echo("entities: " + ", ".join(f"{lk.get('name', lk['entity_id'])} [{lk['entity_id']}]" for lk in links))
    if titles:
        click.echo("under headings: " + "; ".join(f"{t['title']} ({t['doc_id']})" for t in titles[:5]))
    for t in out:
        click.echo(f"{t['triple_id']} {t['tier']:<11} Q {t['q']:.2f} (S {t['schema_conf']:.2f} E {t['evid_score']:.2f}) "
                   f"{t['head']} -{t['relation']}-> {t['tail']}  [{' '.join(t['text_ids'][:3])}]")


@kg_group.command("triple")
@click.argument("triple_id")
@index_opt
@click.option("--json", "as_json", is_flag=True)
def kg_triple(triple_id, index_dir, as_json):
    """One triple: scores, every source with its passage text, and its reviews."""
    from medr2.index.backend import open_store, read_spec

    kg = _kg(index_dir)
    store = open_store(read_spec(Path(index_dir)), Path(index_dir))
    try:
        t = kg.triple(triple_id)
        if t is None:
            _fail(f"no triple {triple_id!r} (rejected triples are removed)", EXIT_USAGE)
        view = _triple_view(kg, t)
        srcs = kg.sources(triple_id)
        rows = store.passages([r for s in srcs if (r := store.rowid_of(s["text_id"])) is not None])
        by_pid = {r["passage_id"]: r for r in rows.values()}
        for s in srcs:
            p = by_pid.get(s["text_id"])
            s["passage"] = ({"doc_id": p["doc_id"], "title": p["title"], "heading_path": p["heading_path"],
                             "text": p["text"]} if p else None)
        view["sources"] = srcs
        view["reviews"] = kg.reviews(triple_id)
    finally:
        kg.close()
        store.close()
    if as_json:
        click.echo(json.dumps(view, indent=2, ensure_ascii=False))
        return
    click.echo(f"{view['head']} -{view['relation']}-> {view['tail']}  [{triple_id}]")
    click.echo(f"tier {view['tier']}  Q {view['q']}  SchemaConf {view['schema_conf']} (entity {view['entity_score']}, "
               f"relation {view['relation_score']}, type {view['type_score']}, direction {view['direction_score']})  "
               f"EvidScore {view['evid_score']} (agreement {view['agreement']}, support {view['support']}, "
               f"human {view['human']})")
    for s in view["sources"]:
        p = s["passage"] or {}
        click.echo(f"- {s['text_id']} [{s['extractor']}] {p.get('doc_id', '?')} {' > '.join(p.get('heading_path', []))}")
        if p:
            click.echo("    " + " ".join(p["text"].split())[:300])
    for r in view["reviews"]:
        click.echo(f"review: {r['action']} by {r['reviewer']} at {r['at']:.0f} {r['note'] or ''}")


@kg_group.command("review")
@click.argument("triple_id")
@index_opt
@config_opt
@click.option("--confirm", "action", flag_value="confirm", help="Human verification: raises EvidScore.")
@click.option("--reject", "action", flag_value="reject", help="Remove the triple (remembered across rebuilds).")
@click.option("--note", default="", help="Why (kept in the review log).")
@click.option("--reviewer", help="Who reviews (default: the login name).")
@click.option("--json", "as_json", is_flag=True)
def kg_review(triple_id, index_dir, config_path, action, note, reviewer, as_json):
    """Confirm or reject a triple; only the affected triples are recomputed."""
    from medr2.kg.build import review, stored_config

    if not action:
        _fail("say --confirm or --reject", EXIT_USAGE)
    given = _load_config(config_path)
    kg = _kg(index_dir)
    try:
        out = review(kg, stored_config(kg, given.kg if given else None), triple_id, action, reviewer, note)
    except KeyError as e:
        _fail(str(e.args[0]), EXIT_USAGE)
    finally:
        kg.close()
    if as_json:
        click.echo(json.dumps(out, indent=2, ensure_ascii=False))
        return
    b, a = out["before"], out["after"]
    if a:
        click.echo(f"confirmed {triple_id}: EvidScore {b['evid_score']} -> {a['evid_score']}, Q {b['q']} -> {a['q']}, "
                   f"tier {b['tier']} -> {a['tier']} ({out['seconds']} s)")
    else:
        click.echo(f"rejected {triple_id}: removed from the graph (tier was {b['tier']}, Q {b['q']})")


@kg_group.command("export")
@index_opt
@click.option("--format", "fmt", required=True, type=click.Choice(["jsonl", "graphml", "csv"]))
@click.option("--out", "out_path", required=True, type=click.Path(), help="File (jsonl, graphml) or directory (csv).")
def kg_export(index_dir, fmt, out_path):
    """Export triples with quality and TextIDs: JSON Lines, GraphML, or Neo4j import CSV."""
    from medr2.kg.export import export

    kg = _kg(index_dir)
    try:
        n = export(kg, fmt, out_path)
    except OSError as e:
        _fail(f"cannot write {out_path}: {e}")
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

    given = _load_config(config_path)
    kg = _kg(index_dir)
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
                _fail(f"{import_path}: not a schema file ({e}); export one with --export first", EXIT_USAGE)
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
@click.option("--format", "fmt", default="auto", type=click.Choice(["auto", "jsonl", "medmcqa"]),
              show_default=True)
@click.option("--limit", type=int, help="At most this many cases.")
@click.option("--llm", "llm_spec", help="Decompose with this generator (default: the deterministic extractor).")
@click.option("--progress/--no-progress", default=None)
def kg_cases(case_file, index_dir, config_path, fmt, limit, llm_spec, progress):
    """Personalized graph from solved cases (question, answer, explanation); resumable."""
    from medr2.kg.build import library_for
    from medr2.kg.extract.rules import RuleExtractor
    from medr2.kg.personalized import CaseGraphBuilder, load_cases
    from medr2.llm.base import LLMError

    cfg = _cfg(config_path)
    idx = _open(index_dir, cfg)
    kg = _kg(index_dir)
    try:
        llm = None
        if llm_spec:
            llm = _llm(llm_spec, idx, index_dir)
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
        _fail(str(e), EXIT_USAGE)
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

    kg = _kg(index_dir)
    try:
        n = export_reasoning(kg, out_path, fmt)
    finally:
        kg.close()
    click.echo(f"wrote {n} record(s) to {out_path}")


@kg_group.command("search")
@click.argument("question")
@index_opt
@config_opt
@click.option("--union", "with_union", is_flag=True, help="Also the macro-micro union of passages.")
@click.option("--cases", "with_cases", is_flag=True, help="Also match the personalized graph.")
@click.option("--llm", "llm_spec", help="Decompose the question into a triple path with this generator "
                                        "(default: the deterministic extractor).")
@click.option("--json", "as_json", is_flag=True)
def kg_search(question, index_dir, config_path, with_union, with_cases, llm_spec, as_json):
    """Graph retrieval: linked entities, the quality-ranked subgraph, conflicts, dense top-5."""
    from medr2.kg.build import library_for
    from medr2.llm.base import LLMError
    from medr2.search.graph import GraphSearcher
    from medr2.search.hybrid import QueryError, validate_query

    cfg = _cfg(config_path)
    idx = _open(index_dir, cfg)
    kg = _kg(index_dir)
    try:
        question = validate_query(question, idx.config.query.max_query_chars)
        gs = GraphSearcher(kg, library_for(cfg.kg), idx.config, idx)
        out = gs.search(question)
        if with_union:
            out["union"] = gs.union(question, triples=out["triples"])
        if with_cases:
            from medr2.kg.extract.rules import RuleExtractor
            from medr2.kg.personalized import match_cases

            llm = _llm(llm_spec, idx, index_dir) if llm_spec else None
            out["cases"] = match_cases(kg, idx.encoder, question, RuleExtractor(gs.linker), llm)
    except QueryError as e:
        _fail(str(e), EXIT_USAGE)
    except LLMError as e:
        _fail(str(e), EXIT_FAIL)
    except _model_errors() as e:
        _fail(str(e), EXIT_FAIL)
    finally:
        idx.close()
        kg.close()
    if as_json:
        click.echo(json.dumps(out, indent=2, ensure_ascii=False, default=str))
        return
    click.echo("links: " + (", ".join(f"{lk['name']} ({lk['how']} {lk['confidence']})" for lk in out["links"]) or "none"))
    for t in out["triples"]:
        click.echo(f"  {t['score']:.2f} {t['tier']:<11} Q {t['q']:.2f} hop {t['hop']} {t['head']} -{t['relation']}-> "
                   f"{t['tail']} [{' '.join(t['text_ids'][:2])}]")
    for c in out["conflicts"]:
        click.echo(f"  conflict: {c['head']} {' vs '.join(c['relations'])} {c['tail']}")
    for p in out["passages"]:
        click.echo(f"  dense {p['score']:.3f} {p['passage_id']} {p['title'][:60]}")
    for p in out.get("union", []):
        click.echo(f"  union [{'+'.join(p['via'])}] {p['passage_id']} {' > '.join(p['macro'])[:80]}")
    for c in (out.get("cases") or {}).get("cases", []):
        click.echo(f"  case {c['case_id']} {c['score']:.2f}: {c['question'][:80]}")
