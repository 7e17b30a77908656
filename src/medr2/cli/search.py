"""``medr2 search``: hybrid search of an index, as a ranked list or JSON."""

from __future__ import annotations

import click

from medr2.cli.common import EXIT_USAGE, config_opt, fail, index_opt, load_config, model_errors


@click.command()
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
    from medr2.api import Medr2
    from medr2.search.hybrid import QueryError
    from medr2.store.layout import BackendError

    config = load_config(config_path)
    try:
        kb = Medr2(index_dir, config)
    except FileNotFoundError as e:
        fail(str(e), EXIT_USAGE)
    try:
        result = kb.search(query, k=k, source_types=source_types, year_min=year_min, year_max=year_max,
                           languages=languages, fusion=fusion)
    except (QueryError, BackendError) as e:
        fail(str(e), EXIT_USAGE)
    except model_errors() as e:
        fail(str(e))
    except (RuntimeError, ImportError) as e:  # e.g. a configured cross-encoder that cannot load
        fail(str(e))
    finally:
        kb.close()
    if as_json:
        click.echo(result.model_dump_json(indent=2))
    else:
        _print_hits(result)


def _print_hits(result) -> None:
    click.echo(f"query: {result.query}")
    for note in result.notes:
        click.echo(f"note: {note}")
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
        if s.get("relevance") is not None:
            parts.append(f"relevance={s['relevance']:.2f}")
        click.echo(f"\n{n:>2}. [{h.source_type.value}] {h.title}" + (f" ({h.year})" if h.year else ""))
        click.echo(f"    {h.passage_id}  doc={h.doc_id}  " + " ".join(p for p in parts if p))
        if h.heading_path:
            click.echo(f"    > {' > '.join(h.heading_path)}")
        text = " ".join(h.text.split())
        click.echo(f"    {text[:300]}{'...' if len(text) > 300 else ''}")
