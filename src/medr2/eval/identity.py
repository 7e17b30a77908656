"""The identity of an evaluation run: what two ``medr2 eval run`` invocations must agree on to
write into one run directory (:func:`run_identity`), less what cannot change an answer
(runtime-only settings) or what the run cannot read (:func:`unread_settings`);
:func:`medr2.eval.runner.run` compares it before it resumes a run.

Example::

    >>> run_identity({"dataset": "medqa:100", "method": "direct", "answer_mode": "loglik",
    ...               "config": {"serve": {"port": 1}}})["config"]  # the service's settings change no answer
    {}
"""

from __future__ import annotations

from typing import Optional

from medr2.config import MOVED_KEYS, RecommendConfig


# Settings that change no answer: how fast or how patiently models are called, how files were read,
# where the answer cache lives (a run may go on with a fresh cache, to time it).
_RUNTIME_ONLY = {"llm": {"n_threads", "timeout_s", "retries", "backoff_s", "concurrency", "cache_path"}, "ingest": None}


def run_identity(manifest: dict) -> dict:
    """What must agree for two invocations to write into one run directory: the dataset and its
    subset size (seeded subsets of different sizes are different draws, not one inside the
    other), subset seed, method, answer mode, models, the index's corpus (documents and passages
    by source type: an index rebuilt from the same corpora, or a checkout moved elsewhere, resumes;
    the index path is recorded but not compared), own-source rule and the config, less
    runtime-only settings and what the run cannot read (:func:`unread_settings`). ``--limit``
    and ``--shard`` only split one run.

    >>> a = run_identity({"dataset": "medqa:100", "subset_seed": 0, "config": {"llm": {"n_threads": 2}}})
    >>> a == run_identity({"dataset": "medqa:100", "subset_seed": 0, "config": {"llm": {"n_threads": 8}}})
    True
    >>> a == run_identity({"dataset": "medqa:200", "subset_seed": 0, "config": {"llm": {"n_threads": 2}}})
    False
    """
    cfg = {}
    ignored = _merged(_RUNTIME_ONLY, unread_settings(manifest))
    for section, values in moved_keys_read(manifest.get("config") or {}).items():
        drop = ignored.get(section, set())
        if drop is None:
            continue
        kept = {k: v for k, v in values.items() if k not in drop} if isinstance(values, dict) else values
        if kept != {} or values == {}:  # a section left empty by what the run cannot read is not compared
            cfg[section] = kept
    return {"dataset": manifest.get("dataset"), "subset_seed": manifest.get("subset_seed"),
            **{k: manifest.get(k) for k in ("method", "answer_mode", "models", "corpus", "own_source_excluded")},
            "config": cfg}


def _merged(*skips: dict) -> dict:
    """Per section, the union of the keys to leave out (None, the whole section, wins)."""
    out: dict = {}
    for skip in skips:
        for section, keys in skip.items():
            have = out.get(section, set())
            out[section] = None if (keys is None or have is None) else set(have) | set(keys)
    return out


# The methods that answer with the generator alone, and the config they never read (None: the
# whole section): every question still passes the length check (query.max_question_chars)
DIRECT_METHODS = ("direct", "direct_cot")
NOT_READ_BY_DIRECT: dict[str, Optional[set[str]]] = {
    **dict.fromkeys(("segment", "dense", "sparse", "fusion", "rerank", "formulate", "appraise", "assess", "gate",
                     "kg", "index")),
    "query": {"max_query_chars"}}

# Settings added since some runs were recorded, with the value that reproduces what those runs
# did: an older manifest that lacks one is read with it, so a run made before a setting existed
# is not resumed under a value that changes its answers (a key neither records is not compared).
# Every setting added after 2026-12-06 belongs here (tests/eval/test_identity_keys.py checks the
# config's keys against a snapshot of that day).
ADDED_KEYS: dict[tuple[str, ...], object] = {
    ("kg", "cases", "passages_k"): 0,  # the retrieval union of TCM-DiffRAG (2026-12-05)
    ("kg", "cases", "min_findings"): 0,  # knowledge items answered from retrieval (2026-12-06)
    # statements read with their section heading (2026-12-06; a heading line no longer joins the
    # statement above it whatever this says, so older rows are not reproduced exactly: runs that read
    # [recommend] are trust runs, which are rerun, not resumed, after such a change)
    ("recommend", "section_headings"): False,
    ("recommend", "cover_min_relevance"): 0.2,  # coverage of question parts had read min_relevance (0.2)
    ("recommend", "llm_cover_min_relevance"): 0.3,  # ... and with a generator llm_min_relevance (0.3)
    ("apply", "choice_rationale"): "before",  # a multiple-choice letter after its chain of thought (2026-12-06)
    ("gate", "generated_weight"): 1.0,  # a generated letter with evidence always stood (2026-12-06)
    ("appraise", "floor_min_passages"): 0,  # the relevance floor was never waived (2026-12-06)
    ("recommend", "guideline_by"): "statement",  # one_guideline kept the best statement's guideline (2026-12-06)
    ("gate", "language_weights"): {},  # one loglik evidence weight for every language (2026-12-06)
    ("rerank", "max_unknown_share"): 1.0,  # the cross-encoder scored every script (2026-12-07)
    ("gate", "confidence_gain"): False,  # the loglik gate weighed evidence whatever it did to confidence (2026-12-07)
    ("recommend", "fill_parts"): False,  # uncovered question parts were not filled (2026-12-07)
    ("recommend", "fill_min_relevance"): 0.3,  # read only with fill_parts
    ("recommend", "llm_fill_parts"): False,
    ("recommend", "llm_answer"): "write",  # a generator always wrote the guideline answer (2026-12-07)
    ("recommend", "judge_overlap_weight"): 0.5,  # the judge_* selection is read only with llm_answer = quote
    ("recommend", "judge_min_relevance"): 0.5,
    ("recommend", "judge_keep_ratio"): 0.85,
    ("recommend", "judge_max_items"): 5,
    ("recommend", "judge_one_guideline"): True,
}


def unread_settings(manifest: dict) -> dict[str, Optional[set[str]]]:
    """Config a run cannot read, by section (None: the whole section), so that a change there
    does not block resuming it: the web service's; ``[recommend]`` unless the manifest says some
    questions are free text (``free_text``: trust runs, and an ``eval run`` of a set with questions
    without options; recommendation answers are for free-text questions only);
    ``[amt]`` outside the LLM-AMT method; ``[kg.cases]`` outside TCM-DiffRAG; every retrieval,
    appraisal and gate setting in direct answering (it reads the generator's settings,
    ``[apply]``'s answer length and ``query.max_question_chars``); ``apply.choice_rationale`` in a run
    that writes no rationale (log-likelihood answers, methods without a chain of thought);
    ``gate.generated_weight`` and ``appraise.floor_min_passages`` in log-likelihood runs and trust
    runs (the latter also in runs without a generator or a fine rerank); all three in a run of free-text
    questions only (``multiple_choice: false``); the log-likelihood combination's settings
    (``gate.evidence_weight``, ``confidence_gain``, ``language_weights``) outside log-likelihood runs;
    ``rerank.max_unknown_share`` where questions and index are English only (``languages``) or no
    cross-encoder reranks.

    >>> unread_settings({"method": "medr2", "answer_mode": "loglik"})
    {'serve': None, 'recommend': None, 'amt': None, 'kg': {'cases'}, 'apply': {'choice_rationale'}, 'gate': {'generated_weight'}, 'appraise': {'floor_min_passages'}}
    >>> u = unread_settings({"method": "tcm_diffrag", "answer_mode": "generate"})
    >>> {k: v for k, v in u.items() if k != "gate"}, sorted(u["gate"])
    ({'serve': None, 'recommend': None, 'amt': None, 'appraise': {'floor_min_passages'}}, ['confidence_gain', 'evidence_weight', 'language_weights'])
    >>> u = unread_settings({"method": "medr2", "answer_mode": "generate", "languages": {"questions": ["en"], "index": ["en"]}})
    >>> {k: v for k, v in u.items() if k != "gate"}
    {'serve': None, 'recommend': None, 'amt': None, 'kg': {'cases'}, 'rerank': {'max_unknown_share'}}
    >>> "recommend" in unread_settings({"method": "trust", "free_text": True})
    False
    >>> unread_settings({"method": "medr2", "free_text": True, "multiple_choice": False})["apply"]
    {'choice_rationale'}
    >>> sorted(unread_settings({"method": "direct", "answer_mode": "loglik"}))[:4]
    ['amt', 'apply', 'appraise', 'assess']
    """
    method = manifest.get("method") or ""
    out: dict[str, Optional[set[str]]] = {"serve": None}
    if method in DIRECT_METHODS:
        out.update(NOT_READ_BY_DIRECT)
    if not manifest.get("free_text"):
        # without a generator the coarse stage keeps recommend.extractive_k passages when enabled
        no_llm = no_llm_run(manifest)
        out["recommend"] = ({k for k in RecommendConfig.model_fields} - {"enabled", "extractive_k"}) if no_llm else None
    if method != "llm_amt":
        out["amt"] = None
    if method != "tcm_diffrag":
        out.setdefault("kg", {"cases"})
    loglik = str(manifest.get("answer_mode") or "").startswith("loglik")
    no_choice = manifest.get("multiple_choice") is False  # a set of free-text questions only
    if loglik or no_choice or not _writes_rationale(method):
        # where a multiple-choice rationale goes, in a run that writes none
        out = _merged(out, {"apply": {"choice_rationale"}})
    if loglik or no_choice or not _registered(method):
        # the weighing of generated multiple-choice letters (trust runs: free-text questions only)
        out = _merged(out, {"gate": {"generated_weight"}, "appraise": {"floor_min_passages"}})
    elif no_llm_run(manifest) or not _fine_rerank(method):
        # the floor's waiver: generated answers of the methods with a fine rerank only
        out = _merged(out, {"appraise": {"floor_min_passages"}})
    if not loglik:  # the loglik gate's combination: generated answers weigh with gate.generated_weight
        out = _merged(out, {"gate": {"evidence_weight", "confidence_gain", "language_weights"}})
    fused = ((manifest.get("config") or {}).get("rerank") or {}).get("cross_encoder") == ""
    if english_only(manifest) or fused:
        # English text has next to no unknown word pieces in the vocabularies medr2 loads (at most
        # 1.9% with the bundled one); the fused order has no vocabulary
        out = _merged(out, {"rerank": {"max_unknown_share"}})
    return out


def english_only(manifest: dict) -> bool:
    """Whether the run's questions and its index are all English (``languages`` in the manifest;
    False when it does not say).

    >>> english_only({"languages": {"questions": ["en"], "index": ["en"]}}), english_only({})
    (True, False)
    >>> english_only({"languages": {"questions": ["en"], "index": ["en", "zh"]}})
    False
    """
    langs = manifest.get("languages") or {}
    seen = set(langs.get("questions") or []) | set(langs.get("index") or [])
    return seen == {"en"} and bool(langs.get("questions")) and bool(langs.get("index"))


def no_llm_run(manifest: dict) -> bool:
    """A run answered without a generator (``--llm none``)."""
    return "models" in manifest and (manifest.get("models") or {}).get("generator") in (None, "none")


def _fine_rerank(method: str) -> bool:
    from medr2.pipelines.registry import PIPELINES

    return bool(getattr(PIPELINES.get(method), "fine_rerank", False))


def _registered(method: str) -> bool:
    from medr2.pipelines.registry import PIPELINES

    return method in PIPELINES


def _writes_rationale(method: str) -> bool:
    """Whether a registered method writes a rationale (its chain of thought); other runs (trust
    runs: free-text questions only) write none before a letter."""
    from medr2.pipelines.registry import PIPELINES

    spec = PIPELINES.get(method)
    return spec is not None and spec.cot


def moved_keys_read(config: dict) -> dict:
    """A stored config (an older run's manifest) with keys that have moved read at their new place,
    and settings added since (:data:`ADDED_KEYS`) at the value it ran with.

    >>> moved_keys_read({"appraise": {"context_tokens": 1024, "alpha": 1.0}})["apply"]
    {'context_tokens': 1024, 'choice_rationale': 'before'}
    >>> r = moved_keys_read({})["recommend"]  # a section added since is read at its old values too
    >>> r["section_headings"], r["guideline_by"], r["fill_parts"], r["llm_answer"]
    (False, 'statement', False, 'write')
    >>> moved_keys_read({"kg": {"cases": {"k": 3}}})["kg"]["cases"]
    {'k': 3, 'passages_k': 0, 'min_findings': 0}
    """
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in config.items()}
    for (old_t, key), (new_t, new_key) in MOVED_KEYS.items():
        if isinstance(out.get(old_t), dict) and key in out[old_t]:
            value = out[old_t].pop(key)
            out.setdefault(new_t, {}).setdefault(new_key, value)
    for path, value in ADDED_KEYS.items():  # copies down the path, so the caller's dict is not changed
        parent, ok = out, True
        for name in path[:-1]:
            if name not in parent:  # a section added since: the old run had its old value too
                parent[name] = {}
            if not isinstance(parent.get(name), dict):
                ok = False
                break
            parent[name] = dict(parent[name])
            parent = parent[name]
        if ok:
            parent.setdefault(path[-1], value)
    return out


def identity_diff(mine: dict, theirs: dict) -> list[str]:
    """What two run identities (:func:`run_identity`) disagree on: the top-level keys both record
    that differ, then ``config [sections]`` for the config sections that differ (what one side
    does not record, an older medr2 or a setting added since, is not compared).

    >>> a = run_identity({"method": "medr2", "models": {"g": "x"}, "config": {"rerank": {"k": 30}}})
    >>> identity_diff(a, run_identity({"method": "medr2", "models": {"g": "y"}, "config": {"rerank": {"k": 20}}}))
    ['models', 'config [rerank]']
    """
    diff = [k for k in mine if k != "config" and theirs.get(k) is not None and theirs[k] != mine[k]]
    sections = sorted(sec for sec in set(mine["config"]) & set(theirs["config"])
                      if differs(mine["config"][sec], theirs["config"][sec]))
    if sections:
        diff.append(f"config [{', '.join(sections)}]")
    return diff


def differs(a, b) -> bool:
    """Settings both record differ (at any depth: a key added to a nested section since is not
    compared).

    >>> differs({"cases": {"k": 3}}, {"cases": {"k": 3, "passages_k": 0}}), differs({"cases": {"k": 3}}, {"cases": {"k": 2}})
    (False, True)
    """
    if isinstance(a, dict) and isinstance(b, dict):
        return any(differs(a[k], b[k]) for k in set(a) & set(b))
    return a != b
