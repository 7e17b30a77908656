"""The bundled illustrative demo: a small corpus written by the medr2 authors (not clinical
advice) and sample questions, ingested into ``.demo/index``, searched, and answered by the
Med-R2 pipeline with cited evidence (``make demo``).

The answers use the bundled Qwen2.5-Coder-1.5B (``--llm local``, the default) on a smaller
budget than the paper's, so that a 2-core CPU answers each question in one to three minutes:
see :func:`demo_config`. ``--llm none`` answers with the deterministic extractive path."""

from __future__ import annotations

import json
from pathlib import Path

import click

CORPUS = Path(__file__).parent / "corpus"
QUESTIONS = Path(__file__).parent / "questions.json"

BANNER = ("medr2 demo: the corpus is illustrative text written for this demo, with invented studies; "
          "it is not clinical advice.")


def questions() -> list[dict]:
    return json.loads(QUESTIONS.read_text(encoding="utf-8"))


CPU_BUDGET = Path(__file__).parent / "cpu-budget.toml"


def demo_config():
    """Demo settings: the paper's pipeline on a CPU budget (``cpu-budget.toml``, stated when the
    demo runs).

    >>> c = demo_config()
    >>> c.apply.context_tokens, c.assess.max_rounds, c.apply.few_shot
    (1200, 2, 1)
    """
    from medr2.config import Config

    return Config.load(CPU_BUDGET)


def answer_questions(index_dir: Path, llm: str, qs: list[dict]) -> int:
    from medr2.render import print_answer
    from medr2.pipelines import Engine, Pipeline

    cfg = demo_config()
    click.echo(f"\nAnswering with the Med-R2 pipeline (generator: {llm}; demo budget: coarse k "
               f"{cfg.appraise.coarse_k}, context {cfg.apply.context_tokens} tokens, at most "
               f"{cfg.assess.max_rounds} rounds; model calls are cached in {index_dir}/llm-cache.sqlite)")
    engine = Engine.open(index_dir, cfg, generator=llm)
    try:
        for n, q in enumerate(qs, 1):
            click.echo(f"\n===== question {n}/{len(qs)} =====")
            res = Pipeline(engine, "medr2").run(q["question"], q.get("options") or {})
            print_answer(res, explain=False)
            u = res.usage
            click.echo(f"({u.get('wall_seconds')} s, {u.get('calls')} model calls, "
                       f"{u.get('prompt_tokens')}+{u.get('completion_tokens')} tokens, rounds {len(res.rounds)})")
    finally:
        engine.close()
    return 0


def show_graph(index_dir: Path, question: str) -> None:
    """Build the quality-aware knowledge graph of the demo index and show the subgraph of a question."""
    from medr2.config import Config
    from medr2.index.index import Index
    from medr2.kg.build import KGBuilder, library_for, make_extractors, open_kg, sync_index
    from medr2.search.graph import GraphSearcher

    cfg = Config()
    click.echo("\nBuilding the knowledge graph (rules + structured extractors; the terminology library is "
               "built once, by `medr2 build-runtime` or on first use, about 20 s)...")
    kg = open_kg(index_dir)
    try:
        lib = library_for(cfg.kg)
        with Index.open(index_dir) as idx:
            r = sync_index(idx.store, KGBuilder(kg, lib, make_extractors(cfg.kg.extractors, lib), cfg.kg))
            c = kg.counts()
            click.echo(f"graph: {c['triples']} triples ({r['documents_added']} documents read now), tiers {c['tiers']}")
            g = GraphSearcher(kg, lib, cfg, idx).search(question)
        click.echo(f"\nGraph view of: {question}")
        click.echo("  linked: " + (", ".join(f"{lk['name']} ({lk['how']})" for lk in g["links"]) or "none"))
        for t in g["triples"][:6]:
            click.echo(f"  {t['tier']:<11} Q {t['q']:.2f} {t['head']} -{t['relation']}-> {t['tail']}  "
                       f"[{' '.join(t['text_ids'][:2])}]")
        click.echo("  (medr2 ask --kg answers from this subgraph with a tier-conditioned prompt)")
    finally:
        kg.close()


def run_demo(index_dir: Path, k: int = 3, llm: str = "") -> int:
    from medr2.index.index import Index
    from medr2.ingest.pipeline import ingest
    from medr2.search.hybrid import HybridSearcher

    click.echo(BANNER)
    with Index.open(index_dir, create=True, writable=True) as idx:
        report = ingest(idx, [CORPUS], progress=False)
        click.echo(f"ingest {report.status}: {report.files_ingested} file(s) read, {report.files_unchanged} unchanged; "
                   f"{report.documents_added} new documents, {report.passages_added} passages added "
                   f"({report.seconds:.1f}s)")
        for p in report.failed_files + report.record_problems:
            click.echo(f"  problem: {p}")
        st = idx.stats()
        click.echo(f"index {index_dir}: {st['documents']} documents, {st['passages']} passages, "
                   + ", ".join(f"{t} {v.get('documents', 0)}" for t, v in sorted(st["by_source_type"].items())))
        searcher = HybridSearcher(idx)
        for q in questions():
            result = searcher.search(q["question"], k=k)
            click.echo(f"\nQ: {q['question']}  [{q.get('ebm_category', '')}]")
            for n, h in enumerate(result.hits, 1):
                path = " > ".join(h.heading_path[1:] if h.heading_path[:1] == [h.title] else h.heading_path)
                design = ", ".join(h.publication_types)
                click.echo(f"  {n}. [{h.source_type.value}{': ' + design if design else ''}] {h.title}"
                           + (f" — {path}" if path else ""))
                click.echo(f"     {h.passage_id} fused={h.score:.3f} "
                           f"dense#{h.scores.get('dense_rank')} bm25#{h.scores.get('sparse_rank')}")
                text = " ".join(h.text.split())
                click.echo(f"     {text[:220]}{'...' if len(text) > 220 else ''}")
    if report.status != "ok":
        return 1
    show_graph(index_dir, questions()[0]["question"])
    if llm:
        return answer_questions(index_dir, llm, questions())
    return 0
