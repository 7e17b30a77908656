"""Command line: ``medr2 ingest | search | ask | doc | index | kg | eval | serve | demo | formats |
train-classifier | train-reranker | train-doctype | train-design | build-runtime | doctor``.

Exit codes: 0 success, 1 failure, 2 bad usage or input, 3 partial ingestion (some files or
records could not be read; the rest was ingested).

One module per command or group (:mod:`medr2.cli.ingest`, :mod:`medr2.cli.search`,
:mod:`medr2.cli.docs`, :mod:`medr2.cli.ask`, :mod:`medr2.cli.eval`, :mod:`medr2.cli.kg`,
:mod:`medr2.cli.serve`, :mod:`medr2.cli.demo`, :mod:`medr2.cli.train`, :mod:`medr2.cli.runtime`), what
they share in :mod:`medr2.cli.common`; each imports its heavy dependencies inside the command, so
``medr2 --help`` stays fast. A command that needs an extra that is not installed (``serve``,
``milvus``, ``postgres``, ``report``, ``train``) fails with a message naming it (exit code 1).
"""

from __future__ import annotations

import click

from medr2.cli import ask, demo, docs, eval, ingest, kg, runtime, search, serve, train, train_appraisal
from medr2.cli.common import EXIT_FAIL, EXIT_PARTIAL, EXIT_USAGE, MainGroup, answer_mode_opt, config_opt, index_opt

__all__ = ["main", "EXIT_FAIL", "EXIT_USAGE", "EXIT_PARTIAL", "answer_mode_opt", "config_opt", "index_opt"]


@click.group(cls=MainGroup)
@click.version_option(package_name="medr2")
def main() -> None:
    """medr2: evidence-based medical question answering that shows its evidence."""


for _command in (ingest.ingest, ingest.formats, search.search, docs.doc, docs.index_group, ask.ask,
                 ask.train_classifier, train.train_reranker, train_appraisal.train_doctype,
                 train_appraisal.train_design, eval.eval_group, kg.kg_group, serve.serve, serve.mcp, demo.demo,
                 runtime.build_runtime, runtime.doctor):
    main.add_command(_command)
