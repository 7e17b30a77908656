"""``medr2 train-reranker``: build medr2's cross-encoder from public data (see
:mod:`medr2.search.train_reranker`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from medr2.cli.common import EXIT_USAGE, fail


@click.command("train-reranker")
@click.option("--data", type=click.Path(file_okay=False), default=None,
              help="The shared public-data folder (PubMedQA, PubMed abstracts, mixed samples, MedQuAD).")
@click.option("--pairs", "pair_files", multiple=True, type=click.Path(dir_okay=False),
              help="Your own pairs: JSON Lines with query, positive and optional negatives (repeatable).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Model directory to write; point rerank.cross_encoder at it "
                   "(src/medr2/models/reranker rebuilds the shipped one).")
@click.option("--work", "work_dir", type=click.Path(file_okay=False), default=None,
              help="Work folder for the mining index and the mined groups (default: OUT.work).")
@click.option("--layers", default=4, show_default=True, type=click.IntRange(1, 6))
@click.option("--max-length", default=160, show_default=True, type=click.IntRange(32, 512))
@click.option("--epochs", default=2, show_default=True, type=click.IntRange(1, 20))
@click.option("--max-steps", default=0, show_default=True, type=click.IntRange(0),
              help="Stop after this many steps (0: the epochs decide).")
@click.option("--negatives", default=5, show_default=True, type=click.IntRange(1, 29))
@click.option("--batch", "batch_groups", default=8, show_default=True, type=click.IntRange(1, 256))
@click.option("--lr", default=5e-5, show_default=True, type=click.FloatRange(1e-7, 1e-2))
@click.option("--medquad-limit", default=3000, show_default=True, type=click.IntRange(0))
@click.option("--positives", default=4, show_default=True, type=click.IntRange(1, 16),
              help="Gold passages per query; each epoch draws one of them as the positive.")
@click.option("--dev-fraction", default=0.1, show_default=True, type=click.FloatRange(0.0, 0.5))
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--rechoose", is_flag=True,
              help="Do not train: choose the sibling weight, rank prior and calibration of the model in --out "
                   "again on the dev groups mined in --work (ONNX Runtime int8, as it will run).")
def train_reranker(data, pair_files, out_dir, work_dir, layers, max_length, epochs, max_steps, negatives,
                   batch_groups, lr, medquad_limit, positives, dev_fraction, seed, rechoose):
    """Fine-tune the bundled MiniLM into a cross-encoder reranker with hard negatives mined from
    a medr2 index; writes the weights, card.json (data, steps, time, dev scores, calibration)."""
    from medr2.search.rerank_data import RerankDataError
    from medr2.search.train_reranker import TrainOptions, rechoose as rechoose_card, run

    out = Path(out_dir)
    work = Path(work_dir) if work_dir else out.with_name(out.name + ".work")
    if rechoose:
        try:
            card = rechoose_card(out, work, log=lambda m: click.echo(m, err=True))
        except ValueError as e:
            fail(str(e), EXIT_USAGE)
        click.echo(json.dumps({k: card.get(k) for k in ("sibling", "prior", "calibration")}, indent=2))
        click.echo(f"rewrote {out / 'card.json'}")
        return
    if data is None and not pair_files:
        fail("give --data (the shared data folder) and/or --pairs FILE", EXIT_USAGE)
    if data is not None and not Path(data).is_dir():
        fail(f"--data {data} is not a folder", EXIT_USAGE)
    opts = TrainOptions(layers=layers, max_length=max_length, epochs=epochs, max_steps=max_steps,
                        negatives=negatives, batch_groups=batch_groups, lr=lr, medquad_limit=medquad_limit, positives=positives,
                        dev_fraction=dev_fraction, seed=seed)
    try:
        card = run(Path(data) if data else None, [Path(p) for p in pair_files], out, work, opts,
                   log=lambda m: click.echo(m, err=True), progress=sys.stderr.isatty())
    except (RerankDataError, ValueError) as e:
        fail(str(e), EXIT_USAGE)
    click.echo(json.dumps({k: card[k] for k in ("layers", "max_length", "steps", "train_seconds", "dev",
                                                  "calibration")}, indent=2))
    click.echo(f"wrote {out}")
