"""``medr2 build-runtime``: export the bundled models to ONNX so that search starts without torch;
``medr2 doctor``: which engine (ONNX Runtime or torch) each model runs on, and why."""

from __future__ import annotations

import json

import click

from medr2.cli.common import EXIT_FAIL, config_opt, fail, load_config, open_index


@click.command("build-runtime")
@click.option("--force", is_flag=True, help="Rebuild the exports even when they are current.")
@click.option("--reranker", "rerankers", multiple=True, default=("bundled:medr2-reranker",), show_default=True,
              help="medr2 cross-encoder to export: bundled:medr2-reranker or a directory written by "
                   "`medr2 train-reranker` (repeatable).")
def build_runtime(force, rerankers):
    """Export the bundled dense encoder and medr2's reranker to ONNX (fp32 and int8) in
    $MEDR2_HOME/runtime (default ~/.cache/medr2/runtime). Exports whose sources are unchanged
    are kept ("up to date"); a retrained reranker is exported again."""
    from medr2.index.onnx_export import ExportError, build_dense_runtime
    from medr2.index.runtime import runtime_root
    from medr2.locks import try_lock
    from medr2.search.cross_encoder import CrossEncoderError
    from medr2.search.cross_encoder import build_runtime as build_reranker

    root = runtime_root()
    root.mkdir(parents=True, exist_ok=True)
    lock = try_lock(root / ".lock")
    if lock is None:
        fail(f"another `medr2 build-runtime` is writing {root}; wait for it to finish")

    def log(msg: str) -> None:
        click.echo(f"  {msg}", err=True)

    click.echo(f"runtime folder: {root}", err=True)
    jobs = [("dense encoder bundled:all-MiniLM-L6-v2", lambda: build_dense_runtime(force, log))]
    jobs += [(f"reranker {spec}", lambda spec=spec: build_reranker(spec, force, log)) for spec in rerankers]
    jobs.append(("terminologies of the default configuration", terminology_caches))
    try:
        for title, job in jobs:
            click.echo(title, err=True)
            for name, what in job().items():
                click.echo(f"{name}: {what}")
    except (ExportError, CrossEncoderError, ImportError) as e:
        fail(str(e))
    finally:
        lock.close()


def terminology_caches() -> dict[str, str]:
    """Build (or find current) the default configuration's synonym table (offline reformulation)
    and entity library (knowledge graph) in $MEDR2_HOME/terms and /kg, so that the first
    `medr2 demo`, `ask` or `kg build` does not spend ~20 s building them from the terminology
    packages."""
    import time

    from medr2.config import Config
    from medr2.formulate.terms import load_table
    from medr2.kg.build import library_for

    cfg, out = Config(), {}
    f = cfg.formulate
    if f.terminologies or f.synonym_files:
        t = time.perf_counter()
        table = load_table(f.terminologies, f.synonym_files)
        out["synonym table"] = f"{len(table.table)} entries ({time.perf_counter() - t:.1f} s)"
    t = time.perf_counter()
    library_for(cfg.kg)
    out["entity library"] = f"ready ({time.perf_counter() - t:.1f} s)"
    return out


def _dense_row(cfg) -> dict:
    from medr2.index.dense import EncoderError, choose_runtime

    row = {"model": cfg.model, "setting": cfg.runtime}
    try:
        engine, status = choose_runtime(cfg)
    except EncoderError as e:
        return row | {"engine": None, "error": str(e)}
    return row | _why(engine, status)


def _reranker_row(cfg) -> dict:
    from medr2.search.cross_encoder import BUNDLED_NAME, CrossEncoderError, choose_runtime, is_model_dir

    row = {"model": cfg.cross_encoder or None, "setting": cfg.runtime}
    if not cfg.cross_encoder:
        return row | {"engine": None, "note": "no reranker: the fused order is kept"}
    if cfg.cross_encoder.lower() != BUNDLED_NAME and not is_model_dir(cfg.cross_encoder):
        note = "a sentence-transformers cross-encoder, which runs on torch"
        if cfg.runtime == "onnx":
            return row | {"engine": None, "error": f"rerank.runtime = 'onnx' but {note}"}
        return row | {"engine": "torch", "note": note}
    try:
        engine, status = choose_runtime(cfg.cross_encoder, cfg.quantize, cfg.runtime)
    except CrossEncoderError as e:
        return row | {"engine": None, "error": str(e)}
    return row | _why(engine, status) | {"int8": cfg.quantize}


def _why(engine: str, status) -> dict:
    out = {"engine": engine}
    if status is None:
        return out | {"note": "no ONNX export exists for this model"}
    out["export"] = str(status.folder)
    if status.current:
        man = status.manifest
        return out | {"note": f"{'int8' if man.get('quantized') else 'fp32'} export in {status.folder}, built "
                              f"{man.get('built')}" + ("" if engine == "onnx" else " (not used: runtime = 'torch')")}
    return out | {"note": status.describe() + " (`medr2 build-runtime` builds it)"}


@click.command("doctor")
@click.option("--index", "index_dir", type=click.Path(file_okay=False),
              help="Report for this index (its dense model) instead of the defaults.")
@config_opt
@click.option("--json", "as_json", is_flag=True)
def doctor(index_dir, config_path, as_json):
    """Which engine each model runs on (ONNX Runtime without torch, or torch), and why."""
    from importlib.metadata import PackageNotFoundError, version

    from medr2.config import Config
    from medr2.index.runtime import runtime_root, thread_budget

    config = load_config(config_path)
    if index_dir:
        idx = open_index(index_dir, config)
        config = idx.config
        idx.close()
    config = config or Config()
    try:
        ort_version = version("onnxruntime")
    except PackageNotFoundError:
        ort_version = None
    report = {"runtime_folder": str(runtime_root()), "onnxruntime": ort_version, "threads": thread_budget(),
              "dense": _dense_row(config.dense), "reranker": _reranker_row(config.rerank)}
    if as_json:
        click.echo(json.dumps(report, indent=2))
    else:
        click.echo(f"runtime folder: {report['runtime_folder']}   onnxruntime {ort_version or 'not installed'}, "
                   f"{report['threads']} thread(s)")
        for what in ("dense", "reranker"):
            r = report[what]
            used = r.get("engine") or ("error" if r.get("error") else "none")
            click.echo(f"{what:<9}{r['model'] or '-'}   runtime = {r['setting']!r} -> {used}")
            click.echo(f"         {r.get('error') or r.get('note', '')}")
    if report["dense"].get("error") or report["reranker"].get("error"):
        raise SystemExit(EXIT_FAIL)
