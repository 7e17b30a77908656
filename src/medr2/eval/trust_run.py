"""Run the trust comparison (``medr2 eval trust``): each question of a required-knowledge set
answered in each mode, scored by :mod:`medr2.eval.trust`; one JSON file per question and mode
(a killed run resumes), and a summary per mode.

Example::

    >>> from medr2.eval.trust_run import load_trust_questions
    >>> callable(load_trust_questions)
    True
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, Optional

from medr2.eval.trust import MODES, answer_conflicts, holds, rescore, score_answer, summarize


class TrustError(ValueError):
    pass


def load_trust_questions(path: str | Path) -> list[dict]:
    from medr2.ingest.loaders.records import strict_jsonl

    out = []
    for where, rec in strict_jsonl(Path(path), TrustError):
        if not isinstance(rec, dict) or not {"id", "question"} <= set(rec):
            raise TrustError(f"{where}: a question needs id, question, and ngc_id and required (or "
                             "\"unanswerable\": true)")
        if rec.get("unanswerable"):
            if rec.get("required"):
                raise TrustError(f"{where}: an unanswerable question requires nothing; drop its required list")
            rec = {**rec, "ngc_id": rec.get("ngc_id"), "required": []}
        elif not {"ngc_id", "required"} <= set(rec):
            raise TrustError(f"{where}: a question needs ngc_id and required (or \"unanswerable\": true)")
        out.append(rec)
    return out


def required_passages(store, q: dict) -> list[dict]:
    """The index passages (of the question's guideline) holding its required recommendations."""
    rows = store.db.execute("SELECT passage_id, text FROM passages WHERE doc_id=? ORDER BY ordinal",
                            (f"ngc:{q['ngc_id']}",)).fetchall()
    out = []
    for r in q["required"]:
        for pid, text in rows:
            if holds(text, r["text"]) and pid not in {o["passage_id"] for o in out}:
                out.append({"passage_id": pid, "text": text})
                break
    return out


def oracle_answer(engine, q: dict) -> dict:
    """The required recommendations' passages as the only evidence (the ``oracle_kg`` mode)."""
    from medr2.apply.answer import EvidenceItem

    store = engine.index.store
    got = required_passages(store, q)
    items = []
    for i, p in enumerate(got, 1):
        rid = store.rowid_of(p["passage_id"])
        meta = store.passages([rid])[rid]
        items.append(EvidenceItem(i, p["passage_id"], meta["title"] or "", meta["source_type"], 3, p["text"],
                                  list(meta.get("heading_path") or [])))
    rec = engine.recommender
    for it in items:  # relevant by construction: the oracle measures the selection, not abstention
        it.relevance = 1.0
    ra = rec.answer(q["question"], items) if (rec is not None and engine.generator is None and items) else None
    ans = ra.answer if (ra is not None and ra.searched) else engine.answerers[True].answer(q["question"], {}, items)
    return {"answer": ans.answer, "rationale": ans.rationale, "citations": ans.citations,
            "recommendations": [r.model_dump() for r in ans.recommendations], "uncovered": ans.uncovered,
            "insufficient": ans.insufficient, "method": ans.method, "notes": ans.notes,
            "evidence": [{"passage_id": it.passage_id, "text": it.text, "kept": True, "n": it.n} for it in items]}


def trust_identity(models: dict, config: dict, languages: Optional[dict] = None) -> dict:
    """What rows of one trust directory must share: the models and the settings an answer can read
    (:func:`medr2.eval.identity.run_identity` of a generated-answer run; ``languages``: of the
    questions and the index, as an evaluation run's manifest records them)."""
    from medr2.eval.identity import run_identity

    return run_identity({"method": "trust", "answer_mode": "generate", "free_text": True, "models": models,
                         "config": config, **({"languages": languages} if languages else {})})


def check_same_settings(out_dir: Path, modes: list[str], models: dict, config: dict,
                        languages: Optional[dict] = None) -> None:
    """Rows kept from an earlier run are reused, so a directory whose rows were answered with other
    models or settings is refused (its ``manifest.json`` says which), rather than mixing two
    configurations in one table (the rows of every mode are checked: one manifest describes the
    directory). A directory with no rows is not checked.

    >>> import tempfile; d = Path(tempfile.mkdtemp()); (d / "passage").mkdir()
    >>> _ = (d / "passage" / "q1.json").write_text("{}")
    >>> _ = (d / "manifest.json").write_text(json.dumps({"models": {}, "config": {"recommend": {"max_items": 4}}}))
    >>> check_same_settings(d, ["passage"], {}, {"recommend": {"max_items": 4}})
    >>> check_same_settings(d, ["passage"], {}, {"recommend": {"max_items": 2}})
    Traceback (most recent call last):
    ...
    medr2.eval.trust_run.TrustError: .../passage holds rows answered with a different config [recommend] (manifest.json); give another --out, or delete its rows to answer again
    """
    from medr2.eval.identity import identity_diff

    f = out_dir / "manifest.json"
    rows = [m for m in sorted(set(MODES) | set(modes)) if any((out_dir / m).glob("*.json"))]
    if not rows or not f.is_file():
        return
    try:
        old = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return
    if not isinstance(old, dict) or "config" not in old:  # a manifest from before settings were recorded
        return
    diff = identity_diff(trust_identity(models, config, languages),
                         trust_identity(old.get("models"), old["config"], old.get("languages")))
    if diff:
        raise TrustError(f"{out_dir / rows[0]} holds rows answered with a different {', '.join(diff)} "
                         f"({f.name}); give another --out, or delete its rows to answer again")


def run_trust(engine, questions: list[dict], modes: list[str], out_dir: Path,
              progress: Optional[Callable[[str], None]] = None, ragas: Optional[dict] = None) -> dict[str, dict]:
    """``ragas``: {"judge": LLM or None, "runs": int, "library": EntityLibrary, "encoder": ...} adds the
    RAGAS-style metrics (:mod:`medr2.eval.ragas`) to every row, rows kept from an earlier run too.
    ``manifest.json`` beside ``summary.json`` names the models, index, commit and versions."""
    from medr2.eval.manifest import run_languages
    from medr2.eval.runner import git_commit, versions, write_atomic

    for m in modes:
        if m not in MODES:
            raise TrustError(f"unknown mode {m!r}; use {', '.join(MODES)}")
    if "no_rag" in modes and engine.generator is None:
        raise TrustError("mode no_rag answers with the generator alone: give one with --llm, or compare the other "
                         "modes (passage, full, oracle_kg), which answer extractively without one")
    languages = run_languages(engine, [q["question"] for q in questions])
    check_same_settings(out_dir, modes, engine.model_names(), engine.config.model_dump(mode="json"), languages)
    # the settings are recorded before the first answer, so a killed first run is checked on resuming
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"modes": modes, "questions": len(questions), "models": engine.model_names(),
                "index": str(engine.index.path), "commit": git_commit(), "versions": versions(),
                "config": engine.config.model_dump(mode="json"), "languages": languages, "finished": None}
    write_atomic(out_dir / "manifest.json", manifest)
    # question by question, every mode answering each one before the next question: a killed run
    # leaves the modes compared on the same questions
    rows: dict[str, list[dict]] = {m: [] for m in modes}
    for m in modes:
        (out_dir / m).mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    answered = 0
    for i, q in enumerate(questions, 1):
        for mode in modes:
            if mode == "oracle_kg" and q.get("unanswerable"):
                continue  # nothing is required, so there is no oracle evidence
            f = out_dir / mode / f"{q['id']}.json"
            if f.is_file():
                row = json.loads(f.read_text(encoding="utf-8"))
                # the metrics are recomputed from the stored answer and context, so a revised
                # metric applies to rows kept from an earlier run
                required = [r["text"] for r in q["required"]]
                if row.get("evidence") is None:  # a row from before the context was kept: the answer only
                    metrics = {**row["metrics"], "conflict": answer_conflicts(row, required)}
                else:
                    metrics = rescore(row, required)
                changed = row["metrics"] != metrics
                row["metrics"] = metrics
                if ragas is not None and "ragas" not in row and row.get("evidence") is not None:
                    row["ragas"] = _ragas(row["evidence"], row, q, ragas)
                    changed = True
                if changed:
                    write_atomic(f, row)
                rows[mode].append(row)
                continue
            row = _answer_row(engine, q, mode)
            if ragas is not None:
                row["ragas"] = _ragas(row["evidence"], row, q, ragas)
            write_atomic(f, row)
            rows[mode].append(row)
            answered += 1
            if progress:
                progress(f"{i}/{len(questions)} {q['id']} {mode}: {row['seconds']:.0f} s "
                         f"({answered} answered in {time.perf_counter() - start:.0f} s)")
    summary = {}
    for mode in modes:
        summary[mode] = summarize(rows[mode])
        if any("ragas" in r for r in rows[mode]):
            summary[mode]["ragas"] = ragas_summary([r["ragas"] for r in rows[mode] if "ragas" in r])
    (out_dir / "summary.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    write_atomic(out_dir / "manifest.json", {**manifest, "finished": time.strftime("%Y-%m-%dT%H:%M:%S")})
    return summary


def _answer_row(engine, q: dict, mode: str) -> dict:
    """Answer one question in one mode and score it against its required recommendations."""
    from medr2.pipelines import Pipeline

    t = time.perf_counter()
    if MODES[mode] is None:
        res = oracle_answer(engine, q)
    else:
        res = json.loads(Pipeline(engine, MODES[mode]).run(q["question"]).model_dump_json())
    required = [r["text"] for r in q["required"]]
    row = {"id": q["id"], "mode": mode, "question": q["question"], "unanswerable": bool(q.get("unanswerable")),
           "answer": res.get("answer"),
           "rationale": res.get("rationale"),
           "citations": res.get("citations"), "metrics": score_answer(res, required),
           "seconds": round(time.perf_counter() - t, 3), "method": res.get("method"),
           "usage": res.get("usage") or {}, "recommendations": res.get("recommendations") or [],
           "uncovered": res.get("uncovered") or []}
    # the kept evidence (text included) stays with the row, so metrics can be added later
    row["evidence"] = [{"passage_id": e.get("passage_id"), "text": e.get("text", ""), "n": e.get("n")}
                       for e in res.get("evidence") or [] if e.get("kept")]
    return row


def _ragas(evidence: list[dict], row: dict, q: dict, ragas: dict) -> dict:
    from medr2.eval.ragas import ragas_scores

    text = " ".join(x for x in (row.get("rationale"), row.get("answer")) if x)
    return ragas_scores(text, q.get("answer", ""), [e["text"] for e in evidence], ragas.get("judge"),
                        ragas.get("runs", 1), ragas.get("library"), ragas.get("encoder"),
                        required=[r["text"] for r in q.get("required") or []])


def ragas_summary(items: list[dict]) -> dict:
    """Mean of each RAGAS metric over questions; for judge metrics also the mean per-question std
    over repeated judge runs (the judge's own variance)."""
    from medr2.eval.trust import mean

    out = {}
    for k in ("context_entity_recall", "answer_similarity"):
        out[k] = mean(i.get(k) for i in items)
    for k in ("faithfulness", "context_precision", "context_recall", "conflict"):
        vals = [i[k] for i in items if isinstance(i.get(k), dict) and i[k].get("mean") is not None]
        if vals:
            out[k] = mean(v["mean"] for v in vals)
            out[k + "_judge_std"] = mean(v["std"] for v in vals)
    out["judge_failures"] = sum(int(i.get("judge_failures") or 0) for i in items)
    return out
