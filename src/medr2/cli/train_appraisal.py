"""``medr2 train-doctype`` and ``medr2 train-design``: rebuild the appraisal models shipped in
``src/medr2/models/doc_type/`` and ``src/medr2/models/design/`` from the shared public data (see
:mod:`medr2.appraise.train_doc_type` and :mod:`medr2.appraise.train_design`).

Example::

    >>> from click.testing import CliRunner
    >>> from medr2.cli.train_appraisal import train_doctype
    >>> r = CliRunner().invoke(train_doctype, ["--data", "/nonexistent", "--out", "/tmp/x"])
    >>> r.exit_code, "is not a folder" in r.output
    (2, True)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from medr2.cli.common import EXIT_USAGE, fail

_data = click.option("--data", required=True, type=click.Path(),
                     help="The shared public-data folder (PubMedQA, NGC, OpenStax, MedQuAD, MedlinePlus, case reports).")
_seed = click.option("--seed", default=0, show_default=True, type=int)


def _check(data: str) -> Path:
    if not Path(data).is_dir():
        fail(f"--data {data} is not a folder", EXIT_USAGE)
    return Path(data)


@click.command("train-doctype")
@_data
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for doc_type.npz and card.json; point appraise.doc_type_model at its doc_type.npz "
                   "(src/medr2/models/doc_type rebuilds the shipped one).")
@_seed
@click.option("--per-label", default=160, show_default=True, type=click.IntRange(10, 5000),
              help="At most this many passages per document type.")
@click.option("--per-source", default=100, show_default=True, type=click.IntRange(5, 5000),
              help="At most this many passages per labelling rule.")
@click.option("--dev-fraction", default=0.2, show_default=True, type=click.FloatRange(0.05, 0.5))
@click.option("--dense-model", default="bundled:all-MiniLM-L6-v2", show_default=True,
              help="The encoder whose passage vectors the model reads: the index's dense.model.")
def train_doctype(data, out_dir, seed, per_label, per_source, dev_fraction, dense_model):
    """Train the document-type model (f_g) on weakly labelled passages: a logistic regression on
    the bundled MiniLM vectors, C and temperature chosen on dev documents."""
    from medr2.appraise.train_doc_type import train_doc_typer
    from medr2.appraise.weak_labels import WeakLabelError
    from medr2.index.dense import EncoderError

    root = _check(data)
    try:
        card = train_doc_typer(root, Path(out_dir), seed=seed, dev_fraction=dev_fraction, per_label=per_label,
                               per_source=per_source, dense_model=dense_model, log=lambda m: click.echo(m, err=True),
                               progress=sys.stderr.isatty())
    except (EncoderError, WeakLabelError, ValueError) as e:
        fail(str(e), EXIT_USAGE)
    click.echo(json.dumps({k: card[k] for k in ("examples", "train", "dev", "c", "temperature", "seconds")},
                          indent=2))


@click.command("train-design")
@_data
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Folder for design.npz and card.json; point appraise.design_model at its design.npz "
                   "(src/medr2/models/design rebuilds the shipped one).")
@_seed
@click.option("--dev-fraction", default=0.25, show_default=True, type=click.FloatRange(0.05, 0.5))
def train_design(data, out_dir, seed, dev_fraction):
    """Train the study-design model (evidence level without metadata) on weak labels and choose
    the confidence at which it overrides the cue rules on dev abstracts."""
    from medr2.appraise.train_design import train_design_model
    from medr2.appraise.weak_labels import WeakLabelError
    from medr2.config import AppraiseConfig

    root = _check(data)
    try:
        a = AppraiseConfig()
        card = train_design_model(root, Path(out_dir), a.levels, seed=seed, dev_fraction=dev_fraction,
                                  min_support=a.design_min_support, log=lambda m: click.echo(m, err=True))
    except (WeakLabelError, ValueError) as e:
        fail(str(e), EXIT_USAGE)
    click.echo(json.dumps({k: card[k] for k in ("examples", "train", "dev", "c", "dev_model_accuracy",
                                                  "dev_cues_alone", "min_confidence", "seconds")}, indent=2))
