"""``medr2 eval``: answer a benchmark with a pipeline (``run``), trust metrics per mode
(``trust``), tables and plots of runs (``report``), accuracy of runs or of MIRAGE's stored
predictions (``score``)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from medr2.cli.common import (EXIT_USAGE, PipelineChoice, answer_mode_opt, config_opt, fail, index_opt, load_config,
                              model_errors)
from medr2.eval.report import trust_table
from medr2.render import fmt


@click.group("eval")
def eval_group() -> None:
    """Evaluation: score predictions (MIRAGE's stored ones included)."""


@eval_group.command("run")
@click.option("--dataset", "dataset_spec", required=True, metavar="NAME[:N]",
              help="A MIRAGE set (mmlu, medqa, medmcqa, pubmedqa, bioasq; needs --benchmark) or a benchmark file "
                   "(XMedBench .jsonl, MMLU .csv, PubMedQA ori_pqal.json, TCMBench .json); :N takes a fixed seeded subset.")
@click.option("--benchmark", type=click.Path(dir_okay=False, exists=True), help="MIRAGE benchmark.json.")
@click.option("--method", default="medr2", show_default=True, type=PipelineChoice())
@index_opt
@config_opt
@click.option("--llm", "llm_spec", help="Generator (as in ask; default llm.generator).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Run directory.")
@click.option("--limit", type=int, help="Only the first N questions of the (sub)set, in file order.")
@click.option("--ids", "ids_file", type=click.Path(dir_okay=False),
              help="Only the questions whose ids this file lists (one per line), within the (sub)set; "
                   "--shard and --limit then count over them.")
@click.option("--shard", help="i/n: answer every n-th question starting at i (parallel runs).")
@click.option("--seed", default=0, show_default=True, help="Seed of the :N subset and of the answering order "
                                                              "(a seeded shuffle, so a stopped run has answered a random sample).")
@answer_mode_opt
@click.option("--allow-own-source", is_flag=True,
              help="Let retrieval return a question's own source document (its PMID, e.g. the PubMedQA abstract); "
                   "excluded by default, as in MIRAGE's PubMedQA*.")
@click.option("--progress/--no-progress", default=None, help="Progress bar with ETA (default: on a terminal).")
def eval_run(dataset_spec, benchmark, method, index_dir, config_path, llm_spec, out_dir, limit, ids_file, shard, seed,
             answer_mode, allow_own_source, progress):
    """Answer a benchmark with a pipeline; resumable (rerun to continue), cached, shardable."""
    from medr2.eval.datasets import DatasetError
    from medr2.eval.manifest import engine_manifest, run_dir, run_languages
    from medr2.eval.runner import (RunBusy, RunMismatch, answer_order, in_shard, load_questions, only_ids,
                                   own_sources, parse_dataset_spec, parse_shard, run, subset)
    from medr2.llm.base import LLMError, LLMOutputError
    from medr2.pipelines import Engine, Pipeline
    from medr2.search.hybrid import QueryError

    config = load_config(config_path)
    try:
        name, n = parse_dataset_spec(dataset_spec)
        sh = parse_shard(shard)
        qs = subset(load_questions(name, benchmark), n, seed)
    except DatasetError as e:
        fail(str(e), EXIT_USAGE)
    # the settings a run compares hold for the whole subset, whatever slice this call answers
    free_text = any(not q.options for q in qs)
    choice = any(q.options for q in qs)
    asked = [q.question for q in qs]
    if ids_file:
        try:
            qs = only_ids(qs, ids_file)
        except DatasetError as e:
            fail(str(e), EXIT_USAGE)
    qs = answer_order([q for i, q in enumerate(qs) if in_shard(i, sh)][: limit if limit else None], seed)
    try:
        engine = Engine.open(index_dir, config, generator=llm_spec)
    except LLMError as e:
        fail(str(e))
    except model_errors() as e:
        fail(str(e))
    pipe = Pipeline(engine, method, answer_mode=answer_mode)

    def answer(q):
        try:
            res = pipe.run(q.question, q.options, frozenset() if allow_own_source else own_sources(q))
        except (QueryError, LLMError, ValueError) as e:
            # only a call that could not be made is retried on resume; a refused question or a model
            # that never answered in the form asked gives the same again, so it is a wrong answer
            transient = isinstance(e, LLMError) and not isinstance(e, LLMOutputError)
            return {"answer": "", "rationale": f"not answered: {e}", "insufficient": True, "method": "rule",
                    "error": str(e) if transient else None}
        return {"answer": res.answer, "rationale": res.rationale, "citations": res.citations,
                "insufficient": res.insufficient, "usage": res.usage, "method": res.method,
                "error": res.answer if res.method == "error" else None,  # "...the generator failed (why)"
                "context": [{"passage_id": r.passage_id, "doc_id": r.doc_id, "relevance": r.relevance}
                            for r in res.evidence if r.kept],
                "gate": res.gate or None}

    out = run_dir(out_dir, qs[0].dataset if qs else Path(name).stem, method, answer_mode,
                  getattr(engine.generator, "name", None))
    manifest = engine_manifest(engine, dataset_spec, method, index_dir, subset_seed=seed, shard=shard,
                               answer_mode=answer_mode, own_source_excluded=not allow_own_source)
    if free_text:  # free-text questions may get recommendation answers ([recommend])
        manifest["free_text"] = True
    if not choice:  # nor does any question read how multiple-choice answers are given
        manifest["multiple_choice"] = False
    # the languages of the questions and of the index (which settings a run reads depends on them)
    manifest["languages"] = run_languages(engine, asked)

    try:
        totals = run(qs, answer, out, manifest, progress=progress if progress is not None else sys.stderr.isatty())
    except (RunMismatch, RunBusy) as e:
        fail(str(e), EXIT_USAGE)
    finally:
        engine.close()
    click.echo(json.dumps({"out": str(out), **totals}, indent=2))


@eval_group.command("trust")
@click.option("--questions", required=True, type=click.Path(dir_okay=False, exists=True),
              help="Required-knowledge questions (JSON Lines: id, ngc_id, question, required[].text), "
                   "e.g. bench/data/ngc_questions.jsonl.")
@index_opt
@config_opt
@click.option("--mode", "modes", multiple=True, type=click.Choice(["no_rag", "passage", "full", "oracle_kg"]),
              help="Modes to compare (repeatable; default all four). full needs `medr2 kg build`.")
@click.option("--llm", "llm_spec", help="Generator (as in ask; default llm.generator).")
@click.option("--limit", type=int, help="Only the first N questions.")
@click.option("--ragas", "with_ragas", is_flag=True, help="Add RAGAS-style metrics (entity recall and answer "
                                                          "similarity always; judge metrics with --judge).")
@click.option("--judge", "judge_spec", help="LLM judge for faithfulness, context precision and recall.")
@click.option("--judge-runs", default=1, show_default=True, type=click.IntRange(1, 10),
              help="Repeated judge runs (seeds 0..N-1, temperature 0.7) to measure the judge's variance.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False))
def eval_trust(questions, index_dir, config_path, modes, llm_spec, limit, with_ragas, judge_spec, judge_runs, out_dir):
    """Trust metrics (omission, conflicts, unsupported claims, invalid citations, grounded precision) per mode."""
    from medr2.eval.trust_run import TrustError, load_trust_questions, run_trust
    from medr2.llm.base import LLMError
    from medr2.pipelines import Engine

    config = load_config(config_path)
    try:
        qs = load_trust_questions(questions)[:limit] if limit else load_trust_questions(questions)
    except TrustError as e:
        fail(str(e), EXIT_USAGE)
    try:
        engine = Engine.open(index_dir, config, generator=llm_spec)
    except (LLMError, ValueError, OSError) as e:
        fail(str(e), EXIT_USAGE)
    except model_errors() as e:
        fail(str(e))
    ragas = None
    try:
        if with_ragas or judge_spec:
            from medr2.kg.build import library_for
            from medr2.llm.factory import load_llm

            judge = load_llm(judge_spec, engine.config.llm, engine.cache) if judge_spec else None
            ragas = {"judge": judge, "runs": judge_runs, "library": library_for(engine.config.kg),
                     "encoder": engine.index.encoder}
        summary = run_trust(engine, qs, list(modes) or ["no_rag", "passage", "full", "oracle_kg"], Path(out_dir),
                            lambda msg: click.echo(msg, err=True), ragas)  # a line per answer (minutes apart)
    except (TrustError, ValueError, LLMError) as e:
        fail(str(e), EXIT_USAGE)
    finally:
        engine.close()
    for mode, r in summary.items():
        if "ragas" in r:
            click.echo(f"{mode} RAGAS: " + ", ".join(f"{k} {fmt(v)}" for k, v in r["ragas"].items()))
    click.echo(trust_table(summary))


@eval_group.command("report")
@click.argument("run_dirs", nargs=-1, type=click.Path(file_okay=False, exists=True))
@click.option("--trust", "trust_dirs", multiple=True, type=click.Path(file_okay=False, exists=True),
              help="Output directory of `medr2 eval trust` (repeatable).")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False))
def eval_report(run_dirs, trust_dirs, out_dir):
    """Markdown tables (Table 2 and Table 10 layouts, trust metrics) and PNG plots of runs."""
    from medr2.eval.report import write_report

    if not run_dirs and not trust_dirs:
        fail("give at least one RUN_DIR (or --trust DIR)", EXIT_USAGE)
    try:
        f = write_report([Path(d) for d in run_dirs], Path(out_dir), [Path(d) for d in trust_dirs])
    except (ValueError, FileNotFoundError) as e:
        fail(str(e), EXIT_USAGE)
    click.echo(f"wrote {f}")


@eval_group.command("score")
@click.option("--mirage", "mirage_dir", type=click.Path(file_okay=False, exists=True),
              help="A MIRAGE prediction directory (prediction/<dataset>/<setting>/OpenAI/<model>/...).")
@click.option("--benchmark", type=click.Path(dir_okay=False, exists=True),
              help="MIRAGE benchmark.json (gold answers; with --mirage).")
@click.option("--run", "run_dir", type=click.Path(file_okay=False, exists=True), help="A medr2 eval run directory.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of rows.")
def eval_score(mirage_dir, benchmark, run_dir, as_json):
    """Accuracy and std (percent): MIRAGE's stored predictions with MIRAGE's own extraction rules,
    or a medr2 run directory."""
    if bool(mirage_dir) == bool(run_dir):
        fail("give either --mirage DIR --benchmark FILE or --run DIR", EXIT_USAGE)
    if run_dir:
        from medr2.eval.runner import score_run

        rows = score_run(Path(run_dir))
        key = "method"
    else:
        from medr2.eval.mirage import score_predictions

        if not benchmark:
            fail("--mirage needs --benchmark benchmark.json", EXIT_USAGE)
        try:
            bench = json.loads(Path(benchmark).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
            fail(f"{benchmark} is not MIRAGE's benchmark.json ({e})", EXIT_USAGE)
        rows = score_predictions(mirage_dir, bench)
        key = "setting"
    if not rows:
        fail(f"no prediction files under {mirage_dir or run_dir}", EXIT_USAGE)
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    pub = None
    if mirage_dir:
        from medr2.eval.mirage import FULL_SIZES, published

        pub = {id(r): published(r) for r in rows}
    click.echo(f"{'dataset':<14} {key:<24} {'model':<28} {'n':>5} {'acc %':>7} {'std':>6}"
               + (f" {'missing':>7}" if mirage_dir else f" {'unparsed':>8} {'abstain':>7} {'errors':>6}")
               + ("  published (full set)" if pub else ""))
    for r in rows:
        extra = ""
        if pub and pub[id(r)] is not None:
            extra = f"  {pub[id(r)]:.2f} (n = {FULL_SIZES[r['dataset']]})"
        counts = f" {r['missing']:>7}" if mirage_dir else \
            f" {r.get('unparsed', 0):>8} {r.get('insufficient', 0):>7} {r.get('errors', 0):>6}"
        click.echo(f"{r['dataset']:<14} {r[key]:<24} {r['model'][:28]:<28} {r['n']:>5} {r['accuracy']:>7.2f} "
                   f"{r['std']:>6.2f}{counts}{extra}")
    _print_averages(rows, key)


def _print_averages(rows: list[dict], key: str) -> None:
    """MIRAGE's average: the unweighted mean over datasets, per method (or setting) and model,
    over the datasets that one ran on."""
    from medr2.eval.scoring import macro_average

    avg = macro_average(rows, key)
    if not avg:
        return
    click.echo("")
    for (k, model), (acc, n_sets) in avg.items():
        sets = f"{n_sets} dataset" + ("s" if n_sets > 1 else "")
        click.echo(f"{'Avg':<14} {k:<24} {model[:28]:<28} {n_sets:>5} {acc:>7.2f}  (mean over {sets})")
