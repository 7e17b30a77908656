"""``medr2 kg show | triple | review | search``: look at the knowledge graph around an entity, one
triple with its sources, confirm or reject a triple, graph retrieval for a question. Registered
on the ``kg`` group by :mod:`medr2.cli.kg`."""

from __future__ import annotations

import json
from pathlib import Path

import click

from medr2.cli.common import (EXIT_FAIL, EXIT_USAGE, config_opt, config_or_default, fail, index_llm, index_opt,
                              load_config, model_errors, open_graph, open_index)


def _triple_view(kg, t: dict) -> dict:
    ents = kg.entities([t["head_id"], t["tail_id"]])
    return {**t, "head": ents.get(t["head_id"], {}).get("name", t["head_id"]),
            "tail": ents.get(t["tail_id"], {}).get("name", t["tail_id"]),
            "head_type": ents.get(t["head_id"], {}).get("type"), "tail_type": ents.get(t["tail_id"], {}).get("type")}


@click.command("show")
@click.argument("entity")
@index_opt
@config_opt
@click.option("--limit", default=20, show_default=True)
@click.option("--json", "as_json", is_flag=True)
def kg_show(entity, index_dir, config_path, limit, as_json):
    """Triples around an entity (name, synonym or id), best quality first, with provenance."""
    from medr2.kg.build import library_for
    from medr2.search.graph import GraphSearcher

    cfg = config_or_default(config_path)
    kg = open_graph(index_dir)
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
        fail(f"no entity of the graph matches {entity!r}", EXIT_USAGE)
    if as_json:
        click.echo(json.dumps({"links": links, "triples": out, "macro": titles}, indent=2, ensure_ascii=False))
        return
    click.echo("entities: " + ", ".join(f"{lk.get('name', lk['entity_id'])} [{lk['entity_id']}]" for lk in links))
    if titles:
        click.echo("under headings: " + "; ".join(f"{t['title']} ({t['doc_id']})" for t in titles[:5]))
    for t in out:
        click.echo(f"{t['triple_id']} {t['tier']:<11} Q {t['q']:.2f} (S {t['schema_conf']:.2f} E {t['evid_score']:.2f}) "
                   f"{t['head']} -{t['relation']}-> {t['tail']}  [{' '.join(t['text_ids'][:3])}]")


@click.command("triple")
@click.argument("triple_id")
@index_opt
@click.option("--json", "as_json", is_flag=True)
def kg_triple(triple_id, index_dir, as_json):
    """One triple: scores, every source with its passage text, and its reviews."""
    from medr2.index.backend import open_store
    from medr2.store.layout import read_spec

    kg = open_graph(index_dir)
    store = open_store(read_spec(Path(index_dir)), Path(index_dir))
    try:
        t = kg.triple(triple_id)
        if t is None:
            fail(f"no triple {triple_id!r} (rejected triples are removed)", EXIT_USAGE)
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


@click.command("review")
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
        fail("say --confirm or --reject", EXIT_USAGE)
    given = load_config(config_path)
    kg = open_graph(index_dir)
    try:
        out = review(kg, stored_config(kg, given.kg if given else None), triple_id, action, reviewer, note)
    except KeyError as e:
        fail(str(e.args[0]), EXIT_USAGE)
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


@click.command("search")
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

    cfg = config_or_default(config_path)
    idx = open_index(index_dir, cfg)
    kg = open_graph(index_dir)
    try:
        question = validate_query(question, idx.config.query.max_query_chars)
        gs = GraphSearcher(kg, library_for(cfg.kg), idx.config, idx)
        out = gs.search(question)
        if with_union:
            out["union"] = gs.union(question, triples=out["triples"])
        if with_cases:
            from medr2.kg.extract.rules import RuleExtractor
            from medr2.kg.personalized import match_cases

            llm = index_llm(llm_spec, idx, index_dir) if llm_spec else None
            out["cases"] = match_cases(kg, idx.encoder, question, RuleExtractor(gs.linker), llm)
    except QueryError as e:
        fail(str(e), EXIT_USAGE)
    except LLMError as e:
        fail(str(e), EXIT_FAIL)
    except model_errors() as e:
        fail(str(e), EXIT_FAIL)
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


COMMANDS = [kg_show, kg_triple, kg_review, kg_search]
