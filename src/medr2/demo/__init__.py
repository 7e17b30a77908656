"""The bundled illustrative demo: a small corpus written by the medr2 authors (not clinical
advice) and sample questions, ingested into ``.demo/index`` and searched by ``make demo``."""

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


def run_demo(index_dir: Path, k: int = 3) -> int:
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
    return 0 if report.status == "ok" else 1
