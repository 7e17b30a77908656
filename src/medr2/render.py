"""Plain-text rendering of an answer (:class:`medr2.schema.AskResult`): the question, the answer
with its citations, the evidence table, the graph statements and conflicts, and (with
``explain``) every round and the per-stage usage. ``medr2 ask`` and the demo print it.

Example::

    >>> fmt(None), fmt(0.12345), fmt(0.12345, 4), fmt(3)
    ('-', '0.12', '0.1235', '3')
"""

from __future__ import annotations

from textwrap import shorten
from typing import Iterator

import click


def fmt(v, nd: int = 2) -> str:
    """A number for a table: ``-`` for None, floats to ``nd`` decimals."""
    return "-" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


def print_answer(res, explain: bool) -> None:
    """Human-readable answer, citations, evidence table and (with explain) the rounds, on stdout."""
    for line in answer_lines(res, explain):
        click.echo(line)


def answer_lines(res, explain: bool) -> Iterator[str]:
    """The lines :func:`print_answer` prints."""
    by_id = {r.passage_id: r for r in res.evidence}
    yield f"Q: {res.question}"
    for k, v in res.options.items():
        yield f"   {k}. {v}"
    c = res.classification
    if c:
        yield f"EBM category: {c.get('ebm_category')} | question type: {c.get('question_type')} ({c.get('method')})"
    if res.reformulation:
        yield f"Query: {res.reformulation.get('query')} ({res.reformulation.get('method')})"
    flag = "  [INSUFFICIENT EVIDENCE]" if res.insufficient else ""
    from medr2.apply.judge import JUDGED
    from medr2.apply.recommend_answer import EXTRACTIVE, QUOTED

    quoted = res.method in (EXTRACTIVE, QUOTED, JUDGED)  # the answer is the list of recommendations
    sep = "\n" if quoted and not res.insufficient else " "
    yield f"\nAnswer ({res.pipeline}, {res.method}):{sep}{res.answer}{flag}"
    if res.rationale:
        yield f"Rationale: {res.rationale}"
    if quoted and any(r.section for r in res.recommendations):  # the headings they sit under in their guideline
        yield "Sections they sit under:"
        for r in res.recommendations:
            if r.section:
                yield f"  [{r.n}] {r.section}: \"{shorten(r.statement, 60, placeholder=' ...')}\""
    if res.recommendations and not quoted:
        yield "Recommendations that apply (strongest first):"
        for r in res.recommendations:
            grade = f"{r.grade}, {r.strength}" if r.grade else "ungraded"
            yield f"  [{r.n}] ({grade}; {r.direction}) {r.statement}" + (f" (under: {r.section})" if r.section else "")
        if res.uncovered:
            yield "Not covered by these recommendations: " + "; ".join(res.uncovered)
    for r in res.recommendations:
        if r.continued_in:  # the quote's list items come from the passages after the cited one
            yield f"  [{r.n}]'s list goes on in {', '.join(r.continued_in)}"
    if res.citations:
        yield "Citations:"
        for pid in res.citations:
            r = by_id.get(pid)
            if r is not None:
                yield f"  [{r.n}] {pid} {r.title} ({r.source_type.value}, level {r.level} {r.design})"
    for n in res.notes:
        yield f"note: {n}"
    if res.evidence:
        yield "\nEvidence (n, passage, source, level/design, doc type, relevance, f_h, f_g, f_u, F, status):"
        rows = res.evidence if explain else [r for r in res.evidence if r.kept or r.reason.startswith("dropped")]
        for r in rows:
            yield (f"  {fmt(r.n):>2} {r.passage_id} {r.source_type.value:<9} {r.level}/{r.design:<28} "
                   f"{fmt(r.doc_type):<16} {fmt(r.relevance)} {r.f_h} {fmt(r.f_g)} {fmt(r.f_u)} {fmt(r.F)}  "
                   f"{'kept' if r.kept else r.reason}  {r.title[:50]}")
    yield from _graph_lines(res)
    if explain:
        yield from _explain_lines(res)


def _tcm_lines(sg: dict) -> Iterator[str]:
    """TCM-DiffRAG's paths: the case's findings, the options whose definitions list them, and the
    matched solved cases with their paths and reasoning."""
    from medr2.apply.kg_prompt import pairs_text, path_text

    yield f"\nFindings of this case: {'、'.join(sg['findings']) or 'none (a knowledge question)'}"
    if sg.get("knowledge_item"):
        yield "Answered from retrieval (kg.cases.min_findings): no solved case is matched without case findings."
        return
    for d in sg.get("definitions", []):
        if d["pairs"]:
            yield (f"  option {d['option']} {d['term']} [{fmt(d.get('n'))}]: definition lists "
                   + pairs_text(d["pairs"]))
    yield "Matched solved cases (score, findings shared, path):"
    for i, c in enumerate(sg.get("cases", []), 1):
        shared = "、".join(m["finding"] for m in c["matched"]) or "-"
        path = path_text(c["nodes"]) or c["answer"][:60]
        yield f"  [C{i}] {c['case_id']} {fmt(c['score'])}  shared: {shared}  path: {path}"
        if c.get("reasoning"):
            yield f"       reasoning: {c['reasoning'][:300]}"


def _graph_lines(res) -> Iterator[str]:
    sg = res.subgraph
    if sg and "findings" in sg:
        yield from _tcm_lines(sg)
    elif sg:
        links = ", ".join(f"{lk['name']} ({lk['how']} {lk['confidence']})" for lk in sg.get("links", []))
        yield f"\nLinked entities: {links or 'none'}"
        yield "Knowledge-graph statements (label, tier, Q, triple, passages):"
        for t in sg.get("triples", []):
            yield (f"  {t['label']:<4} {t['tier']:<11} {fmt(t['q'])} {t['head']} -{t['relation']}-> {t['tail']}"
                   f"  [{' '.join(t['text_ids'][:3])}{' ...' if len(t['text_ids']) > 3 else ''}]  {t['triple_id']}")
        for t in sg.get("withheld", []):
            yield f"  withheld (exploratory, high-risk): {t['head']} -{t['relation']}-> {t['tail']} {t['triple_id']}"
    for cf in res.conflicts:
        if cf.get("kind") == "triple":
            yield (f"conflict (graph): {cf['head']} {' vs '.join(cf['relations'])} {cf['tail']} (Q {cf['q']})"
                   + (f" -> prefer {cf['preferred']}" if cf.get("preferred") else " -> equal quality"))
            continue
        yield (f"conflict: {cf['a']} vs {cf['b']}: {cf['reason'][:200]}"
               + (f" -> dropped {cf['dropped']}" if cf.get("dropped") else " -> both kept (equal level)"))


def _explain_lines(res) -> Iterator[str]:
    for rd in res.rounds:
        yield f"\nround {rd.round}: query: {rd.query[:300]}"
        yield f"  coarse: {' '.join(rd.coarse_ids)}"
        yield f"  context: {' '.join(rd.context_ids)}"
        yield (f"  answer: {rd.answer[:200]} | Acc={fmt(rd.acc)} mu={fmt(rd.mu, 4)} "
               f"Acc/mu={fmt(rd.ratio)} stop={rd.stop} {rd.stop_reason}")
    u = res.usage
    yield (f"\nusage: {u.get('calls')} model calls, {u.get('prompt_tokens')} prompt + "
           f"{u.get('completion_tokens')} completion tokens, {u.get('wall_seconds')} s "
           f"(outside the LLM: {fmt(u.get('outside_llm_share'))})")
    for name, st in u.get("stages", {}).items():
        yield (f"  {name:<15} calls {st['calls']:>3} (+{st['cached_calls']} cached) "
               f"tokens {st['prompt_tokens']:>6}+{st['completion_tokens']:<5} "
               f"llm {st['llm_seconds']:.2f}s wall {st['seconds']:.2f}s")
