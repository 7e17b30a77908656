"""What an ``medr2 eval run`` records about itself and where it writes: the run directory
``OUT/<dataset>/<method>[+<answer mode>]/<model>`` and the manifest (dataset spec, subset seed,
shard, method, answer mode, own-source rule, models, index, corpus, config) that
:func:`medr2.eval.runner.run` stores beside the answers and compares with the manifests already
there (:func:`medr2.eval.identity.run_identity`) before it resumes a run.

Example::

    >>> run_dir("runs", "MedQA", "medr2", "loglik", "qwen2.5 1.5b").as_posix()
    'runs/MedQA/medr2+loglik/qwen2.5_1.5b'
    >>> m = run_manifest("medqa:100", "medr2", "/data/idx", subset_seed=1, models={"generator": "none"})
    >>> list(m)[:6]
    ['dataset', 'subset_seed', 'shard', 'method', 'answer_mode', 'own_source_excluded']
    >>> list(m)[6:]
    ['models', 'index', 'corpus', 'config']
    >>> m["dataset"], m["answer_mode"], m["own_source_excluded"], m["index"]
    ('medqa:100', 'generate', True, '/data/idx')
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Optional, Union

from medr2.eval.runner import safe_name


def run_dir(out_dir: Union[str, Path], dataset: str, method: str, answer_mode: str, model: Optional[str]) -> Path:
    """The directory of one run: dataset, method (with the answer mode unless it is ``generate``)
    and generator name (``none`` without one), each made a safe file name."""
    tag = method + ("" if answer_mode == "generate" else "+" + answer_mode)
    return Path(out_dir) / safe_name(dataset) / safe_name(tag) / safe_name(model or "none")


def run_manifest(dataset: str, method: str, index_dir: Union[str, Path], *, subset_seed: int = 0,
                 shard: Optional[str] = None, answer_mode: str = "generate", own_source_excluded: bool = True,
                 models: Optional[dict] = None, corpus: Optional[dict] = None, config: Optional[dict] = None) -> dict:
    """The manifest of a run (``dataset`` as given on the command line, ``NAME[:N]``; the index
    path resolved; ``corpus``: documents and passages by source type; ``config``: the engine's
    config as JSON)."""
    return {"dataset": dataset, "subset_seed": subset_seed, "shard": shard, "method": method,
            "answer_mode": answer_mode, "own_source_excluded": own_source_excluded,
            "models": models, "index": str(Path(index_dir).resolve()), "corpus": corpus, "config": config}


def engine_manifest(engine, dataset: str, method: str, index_dir: Union[str, Path], **kw) -> dict:
    """:func:`run_manifest` with the models, corpus and config of an open
    :class:`medr2.pipelines.Engine`."""
    return run_manifest(dataset, method, index_dir, models=engine.model_names(),
                        corpus=engine.index.stats().get("by_source_type"),
                        config=engine.config.model_dump(mode="json"), **kw)


def run_languages(engine, questions: Iterable[str]) -> dict[str, list[str]]:
    """The languages of a run's questions and of the index it reads (``languages`` in a manifest:
    which settings a run reads depends on them, medr2.eval.identity)."""
    from medr2.formulate.language import question_language

    return {"questions": sorted({question_language(q) for q in questions}), "index": sorted(engine.index_languages())}
