"""``medr2 demo``: build, search and answer the bundled illustrative demo (:mod:`medr2.demo`)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from medr2.cli.common import fail, model_errors


@click.command()
@click.option("--index", "index_dir", default=".demo/index", show_default=True, type=click.Path(file_okay=False))
@click.option("--k", default=3, show_default=True, help="Search hits shown per question.")
@click.option("--llm", "llm_spec", default="local", show_default=True,
              help="Generator for the answers: local (bundled Qwen2.5-Coder-1.5B), none (extractive), a .gguf, a URL; "
                   "'skip' only searches.")
def demo(index_dir, k, llm_spec):
    """Build the demo index from the bundled illustrative corpus, search it and answer its sample questions."""
    from medr2.demo import run_demo
    from medr2.llm.base import LLMError

    try:
        code = run_demo(Path(index_dir), k, "" if llm_spec == "skip" else llm_spec)
    except LLMError as e:
        fail(f"{e}\n(`make models` installs the bundled generator; `medr2 demo --llm none` answers without it)")
    except model_errors() as e:
        fail(str(e))
    sys.exit(code)
