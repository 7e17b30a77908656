"""``medr2 ask`` (answer a question with cited, appraised evidence) and ``medr2 train-classifier``."""

from __future__ import annotations

import json

import click

from medr2.cli.common import (EXIT_FAIL, EXIT_USAGE, PipelineChoice, answer_mode_opt, config_opt, fail, index_opt,
                              load_config, model_errors)
from medr2.render import print_answer


@click.command()
@click.argument("question")
@index_opt
@config_opt
@click.option("--option", "option_pairs", multiple=True, metavar='A="TEXT"',
              help="A multiple-choice option (repeat for each).")
@click.option("--llm", "llm_spec", help="Generator: local (bundled Qwen2.5-Coder-1.5B), none, a .gguf path, "
                                        "http(s)://HOST/v1, hf:PATH (default: llm.generator).")
@click.option("--scorer", help="Proxy LM for usefulness (default: llm.scorer, bundled SmolLM2-135M).")
@click.option("--pipeline", "pipeline_name", default="medr2", show_default=True, type=PipelineChoice())
@click.option("--kg", "use_kg", is_flag=True, help="Graph mode (same as --pipeline kg): quality-ranked subgraph, "
                                                   "its passages and the dense top-5, tier-conditioned prompt.")
@answer_mode_opt
@click.option("--rounds", type=click.IntRange(1, 20), help="Maximum retrieval rounds T (default: assess.max_rounds).")
@click.option("--explain", is_flag=True, help="Show every round, all coarse passages and per-stage usage.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (answer, rationale, citations, "
                                                      "evidence, rounds, usage, ...).")
def ask(question, index_dir, config_path, option_pairs, llm_spec, scorer, pipeline_name, use_kg, answer_mode, rounds,
        explain, as_json):
    """Answer a question from the index with cited, appraised evidence (Med-R2, or the graph with --kg)."""
    if use_kg:
        pipeline_name = "kg"
    from medr2.api import Medr2
    from medr2.llm.base import LLMError
    from medr2.search.hybrid import QueryError

    config = load_config(config_path)
    options = _parse_options(option_pairs)
    try:
        kb = Medr2(index_dir, config, generator=llm_spec, scorer=scorer)
    except FileNotFoundError as e:
        fail(str(e), EXIT_USAGE)
    try:
        try:
            kb.engine  # the models, loaded before the question is touched
        except LLMError as e:
            fail(f"{e}\n(use --llm none for the deterministic extractive path without a model)")
        except model_errors() as e:
            fail(str(e))
        except (OSError, RuntimeError, ImportError, ValueError) as e:  # classifier artefact, cross-encoder, ...
            fail(f"{type(e).__name__}: {e}")
        try:
            res = kb.ask(question, options, pipeline=pipeline_name, rounds=rounds, answer_mode=answer_mode)
        except QueryError as e:
            fail(str(e), EXIT_USAGE)
        except LLMError as e:
            fail(str(e))
        except model_errors() as e:
            fail(str(e))
        except (OSError, RuntimeError, ImportError, ValueError) as e:  # terminology files, settings, ...
            fail(f"{type(e).__name__}: {e}", EXIT_USAGE if isinstance(e, ValueError) else EXIT_FAIL)
    finally:
        kb.close()
    if as_json:
        click.echo(res.model_dump_json(indent=2))
    else:
        print_answer(res, explain)


@click.command("train-classifier")
@click.option("--medquad", required=True, type=click.Path(dir_okay=False),
              help="MedQuAD as JSON Lines (question, qtype, doc_id).")
@click.option("--out", "out_path", required=True, type=click.Path(dir_okay=False),
              help="Artefact to write (.npz); point formulate.classifier_path at it.")
@click.option("--test-fraction", default=0.2, show_default=True, type=click.FloatRange(0.05, 0.5))
def train_classifier(medquad, out_path, test_fraction):
    """Train the offline EBM-category classifier and report its held-out accuracy."""
    from medr2.formulate.train import TrainingDataError, train_ebm_classifier

    try:
        model, report = train_ebm_classifier(medquad, test_fraction)
    except TrainingDataError as e:
        fail(str(e), EXIT_USAGE)
    model.save(out_path)
    click.echo(json.dumps(report, indent=2))
    click.echo(f"wrote {out_path}")


def _parse_options(pairs: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in pairs:
        if "=" not in item:
            fail(f"--option {item!r} must look like A=\"text of option A\"", EXIT_USAGE)
        k, v = item.split("=", 1)
        if k.strip().upper() in {x.upper() for x in out}:
            fail(f"--option {k.strip()} is given twice", EXIT_USAGE)
        out[k.strip()] = v.strip()
    return out
