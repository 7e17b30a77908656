"""The base every method builds on: input checks, usage and timing around one answer, and the
steps methods share (formulate with language gating, retrieve + coarse rerank, pack, generate).
A method subclasses :class:`Method` and writes ``answer``; the registry names it.

Example::

    >>> from medr2.pipelines.base import validate_options
    >>> validate_options({"a": "yes", "b": "no"})
    {'A': 'yes', 'B': 'no'}
"""

from __future__ import annotations

import copy
import time
from typing import Any, Callable, Optional

from medr2.apply.answer import ANSWER_MODES, FAILED, Answer, EvidenceItem, answer_schema, direct_answer, failed_answer
from medr2.apply.context import evidence_budget, pack_rows, row_item
from medr2.apply.gate import (GateDecision, agree_decision, decide, decide_generated, relevance_gate, skip_decision,
                              skip_loglik, use_decision)
from medr2.apply.loglik import LoglikAnswerer
from medr2.apply.judge import as_judged
from medr2.apply.recommend_answer import prompt_block, quote_instead, states_nothing
from medr2.apply.prompts import draft_messages
from medr2.formulate.formulator import Formulation, query_text
from medr2.formulate.language import language_refusal, question_language, target_language
from medr2.llm.base import LLMError, Usage, stage, structured, track
from medr2.schema import AskResult, EvidenceRow, Hit
from medr2.search.hybrid import QueryError, validate_query


def validate_options(options: Optional[dict[str, str]]) -> dict[str, str]:
    """Multiple-choice options keyed by one letter each; at least two when any are given."""
    out = {}
    for k, v in (options or {}).items():
        key = str(k).strip().upper()
        if not (len(key) == 1 and key.isalpha()):
            raise QueryError(f"option key {k!r} must be one letter (A, B, C, ...)")
        if not str(v).strip():
            raise QueryError(f"option {key} has no text")
        if key in out:
            raise QueryError(f"option {key} is given twice")
        out[key] = str(v).strip()
    if len(out) == 1:
        raise QueryError("a multiple-choice question needs at least two options")
    return out


UNLIMITED_WINDOW = 10**9  # the extractive path's window: no model reads it


class Method:
    """One method: ``answer`` composes the stage calls; the steps below are shared. Build one
    through the registry: ``Pipeline(engine, "medr2")`` (medr2.pipelines.registry)."""

    iterate = False  # whether --rounds applies (the iterating method overrides)

    def __init__(self, engine, name: str, spec, rounds: Optional[int] = None, answer_mode: str = "generate"):
        if answer_mode not in ANSWER_MODES:
            raise ValueError(f"answer mode is one of {', '.join(ANSWER_MODES)}, not {answer_mode!r}")
        self.engine, self.name, self.s, self.answer_mode = engine, name, spec, answer_mode
        self.exclude_docs: frozenset[str] = frozenset()
        # the question itself, retrieved beside a same-language reformulation and read by the
        # coarse reranker (set per question by gated_formulate)
        self.anchor: Optional[str] = None
        self.question = ""  # the question being answered (the sentence focus reads it)
        # a free-text question with a generator in quote mode (recommend.llm_answer): the coarse stage
        # keeps recommend.extractive_k passages; ``quoting`` while the evidence holds statements to quote
        self.quote_mode = self.quoting = False
        # what the model gives without evidence, once per question (see ``without_evidence``)
        self._own: dict[tuple, Any] = {}
        if rounds is not None and rounds > 1 and not self.iterate:
            raise ValueError(f"--rounds applies to the iterating pipeline (medr2), not to {name}")
        self.rounds = rounds if rounds is not None else (engine.config.assess.max_rounds if self.iterate else 1)
        if self.rounds < 1:
            raise ValueError("rounds must be at least 1")

    def run(self, question: str, options: Optional[dict[str, str]] = None,
            exclude_docs: frozenset[str] = frozenset()) -> AskResult:
        """Answer one question. ``exclude_docs``: document ids retrieval must not return (an
        evaluation question's own source)."""
        e, cfg = self.engine, self.engine.config
        self.exclude_docs = frozenset(exclude_docs)
        self.anchor = None
        question = validate_query(question, cfg.query.max_question_chars, "query.max_question_chars")
        self.question = question
        self._own = {}
        options = validate_options(options)
        r = cfg.recommend
        self.quote_mode = self.quoting = (not options and r.enabled and r.llm_answer == "quote"
                                          and e.generator is not None and e.recommender is not None)
        usage = Usage()
        res = AskResult(question=question, options=options, pipeline=self.name, models=e.model_names())
        t0 = time.perf_counter()
        with track(usage):
            self.answer(question, options, res)
        res.usage = usage.to_dict() | {"wall_seconds": round(time.perf_counter() - t0, 3)}
        return res

    def answer(self, question: str, options: dict[str, str], res: AskResult) -> None:
        raise NotImplementedError

    # -- steps the methods share ----------------------------------------------------------------
    def formulate(self, question: str, res: AskResult, language: str = "") -> Formulation:
        f = self.engine.formulator.formulate(question, self.s.reformulate, language)
        res.notes.extend(f.notes)
        res.classification = f.classification
        if f.reformulation is not None:
            res.reformulation = f.reformulation
        return f

    def gated_formulate(self, question: str, res: AskResult) -> Optional[Formulation]:
        """Formulate, unless the index holds nothing this question can be answered from (empty, or
        only passages in another language that no reformulation reached): then the answer is an
        explicit insufficient-evidence one and None is returned."""
        langs = self.engine.index_languages()
        if not langs:
            self.finish(res, Answer("Insufficient evidence: the index is empty; ingest documents first "
                                    "(medr2 ingest PATH --index DIR).", insufficient=True, method="rule"))
            return None
        qlang = question_language(question)
        target = target_language(qlang, langs)
        f = self.formulate(question, res, target)
        refusal = language_refusal(qlang, langs, res.reformulation.get("method"), f.query)
        if refusal:
            self.finish(res, Answer(refusal, insufficient=True, method="rule"))
            return None
        if f.reformulation is not None and not target:
            # a reformulation in the question's language expands retrieval instead of replacing
            # the question (issue 34: it must not lower recall); a translation replaces it
            self.anchor = query_text(question, max_chars=self.engine.config.query.max_query_chars)
        return f

    def retrieve(self, query: str, notes: list[str]) -> list[Hit]:
        """The hybrid pool of ``query`` (fused with the question's own pool when a reformulation
        expands it) cut to the coarse k by the coarse reranker, which reads the question."""
        e, k = self.engine, self.coarse_k()
        queries = [query] + ([self.anchor] if self.anchor and self.anchor != query else [])
        with stage("retrieve"):
            pool = e.retrieve(queries, k, self.exclude_docs)
        with stage("coarse_rerank"):
            return e.rerank(self.anchor or query, pool, k, notes)

    def coarse_k(self) -> int:
        """Passages kept by the coarse stage: ``appraise.coarse_k``; without a generator, when
        recommendation answers are on, at least ``recommend.extractive_k`` (no window limits the
        extractive answer, and a guideline question's recommendations are spread over many short
        passages); the same for a free-text question when the generator only judges the statements
        (``recommend.llm_answer = "quote"``)."""
        cfg = self.engine.config
        if (self.engine.generator is None or self.quote_mode) and cfg.recommend.enabled:
            return max(cfg.appraise.coarse_k, cfg.recommend.extractive_k)
        return cfg.appraise.coarse_k

    def budget(self) -> int:
        """The evidence window in tokens. Without a generator no model reads the context (the
        extractive answers read every passage), so every appraised passage is in it; nor does it
        read the context of an answer that quotes the judged statements."""
        if self.engine.generator is None or self.quoting:
            return UNLIMITED_WINDOW
        return evidence_budget(self.engine.config, self.engine.generator)

    def settle_quoting(self, rows: list[EvidenceRow]) -> None:
        """In quote mode, whether this evidence is answered by the quoted list: only when its rows hold
        a statement the recommender would read (its candidates); otherwise the model writes the
        answer, from its own window, as with ``llm_answer = "write"``. Called before the window is set."""
        if self.quote_mode:
            items = [row_item(r, 0) for r in rows if not r.reason.startswith("dropped")]
            self.quoting = bool(self.engine.recommender.candidates(items))

    def pack(self, rows: list[EvidenceRow], budget: Optional[int] = None) -> list[EvidenceItem]:
        if budget is None:
            self.settle_quoting(rows)
        focus, focused = self.engine.focus, None
        if focus is not None and self.question:
            with stage("focus"):
                focused = focus.texts(self.question, {r.passage_id: r.text for r in rows
                                                      if not r.reason.startswith("dropped")})
        with stage("pack"):
            return pack_rows(rows, self.budget() if budget is None else budget, self.engine.count_tokens, focused)

    def use_loglik(self, options: dict[str, str]) -> bool:
        if not self.answer_mode.startswith("loglik"):
            return False
        if not options:
            raise ValueError("--answer-mode loglik scores the options of a multiple-choice question; this one has none")
        return True

    def loglik(self) -> LoglikAnswerer:
        return LoglikAnswerer(self.engine.generator, calibrate=self.answer_mode == "loglik-cal")

    def generate(self, question: str, options: dict[str, str], evidence: list[EvidenceItem],
                 graph: Optional[str] = None) -> Answer:
        """The answer step: option letters scored in loglik mode, else the cited answerer (with a
        chain of thought when the method has one); a failing generator is one failed answer."""
        answerer = self.loglik() if self.use_loglik(options) else self.engine.answerers[self.s.cot]
        try:  # quote mode's judge is the generator: a failing one is one failed answer, as below
            ra = self.recommend(question, evidence) if (not options and evidence) else None
        except LLMError as err:
            return failed_answer(err)
        if ra is not None and self.engine.generator is None:
            return ra.answer  # the extractive path: the applicable recommendations are the answer
        if ra is not None and self.quoting:
            judge = getattr(self.engine.recommender.judge, "name", "the generator")
            return as_judged(ra.answer, judge) if ra.judged else ra.answer  # not judged: the fallback's note says why
        give = self.engine.config.recommend.prompt
        block = prompt_block(ra) if (give and ra is not None and ra.recommendations) else None
        with stage("generate"):
            try:
                kw = {k: v for k, v in (("graph", graph), ("recommendations", block)) if v is not None}
                ans = answerer.answer(question, options, evidence, **kw)
            except LLMError as err:
                return failed_answer(err)
        if block is not None and ans.method == "llm" and states_nothing(ans.answer, question):
            ans = quote_instead(ans, ra, len(evidence))
        if ra is not None:  # the applicable recommendations (the list the answer followed, when given)
            ans.recommendations, ans.uncovered = list(ra.recommendations), list(ra.uncovered)
            if ra.insufficient:
                ans.notes.append(f"no guideline recommendation of the {ra.searched} read applies to this question")
        return ans

    def without_evidence(self, key: tuple, make: Callable[[], Any]) -> Any:
        """What the model gives without evidence (its own answer, its option scores), made once per
        question: the iterating method asks for it every round, and it cannot change between rounds.
        A failed answer is not kept (the next round asks again); a raised error is not kept either.
        The memo lives until the next :meth:`run` (a sampling backend's own letter is drawn once).
        Each caller gets its own copy, so the rounds' notes and decisions do not leak into each other."""
        if key not in self._own:
            out = make()
            if isinstance(out, Answer) and out.method in FAILED:
                return out
            self._own[key] = out
        return copy.deepcopy(self._own[key])

    def own_answer(self, question: str, options: dict[str, str], explain: bool = True) -> Answer:
        """The generator's answer without evidence (direct answering; the gate's fallback).
        ``explain=False``: the letter only where the rationale would come after it."""
        e = self.engine
        loglik = self.use_loglik(options)
        cot = self.s.cot and (explain or not self.letter_first())

        def make() -> Answer:
            with stage("generate"):
                try:
                    return (self.loglik().answer(question, options, []) if loglik else
                            direct_answer(e.generator, question, options, cot, e.config.apply.max_answer_tokens,
                                          e.config.apply.choice_rationale == "after"))
                except LLMError as err:  # one failed answer, not a failed run
                    return failed_answer(err)
        return self.without_evidence(("answer", question, tuple(options.items()), self.answer_mode, cot), make)

    def scores_without(self, question: str, options: dict[str, str]) -> tuple[dict[str, float], str]:
        """The option letters' log-probabilities without evidence (one prefill per option), once per question."""
        return self.without_evidence(("scores", question, tuple(options.items()), self.answer_mode),
                                     lambda: self.loglik().letter_scores(question, options, []))

    def gated_generate(self, question: str, options: dict[str, str], evidence: list[EvidenceItem],
                       rows: list[EvidenceRow], res: AskResult) -> Answer:
        """The answer step behind the evidence gate (medr2.apply.gate, ``[gate]``): the context's
        best relevance and, in log-likelihood mode, the option scores with and without evidence
        decide whether (and how much) the evidence is used; ``res.gate`` and ``res.evidence_used``
        say what was decided and why."""
        g = self.engine.config.gate
        if self.quoting:  # the judged, quoted list abstains by its own rule (medr2.apply.recommend)
            return self.generate(question, options, evidence)
        if g.enabled and not evidence and options and self.engine.generator is not None and not self.use_loglik(options):
            # nothing passed appraisal: a multiple-choice question still gets the model's own answer
            # (do no harm), uncited, and says why (a free-text one is answered "insufficient evidence")
            dec = skip_decision(None, "no passage passed appraisal")
            ans = self.own_answer(question, options)
            self.record_gate(res, dec, ans)
            return ans
        if not g.enabled or not evidence:
            return self.generate(question, options, evidence)
        ids = {x.passage_id for x in evidence}
        rels = [r.relevance for r in rows if r.passage_id in ids and r.relevance is not None]
        rel = max(rels) if rels else None
        why_not = relevance_gate(rel, g.min_relevance)
        weigh = bool(options) and self.engine.generator is not None  # generated mode: gate.generated_weight
        if self.use_loglik(options):
            lk = self.loglik()
            with stage("generate"):
                try:
                    s0, why0 = self.scores_without(question, options)
                    s1, why1 = (s0, why0) if why_not else lk.letter_scores(question, options, evidence)
                except LLMError as err:
                    return failed_answer(err)
            dec = skip_loglik(s0, rel, why_not) if why_not else decide(s0, s1, rel, g.min_relevance,
                                                                        g.weight_for(question_language(question)),
                                                                        g.confidence_gain)
            ans = lk.as_answer(s1, why1 if dec.evidence_used else why0, len(evidence) if dec.evidence_used else 0)
            ans.answer = dec.answer
        elif why_not or (weigh and g.generated_weight == 0.0):
            dec = skip_decision(rel, why_not or "gate.generated_weight = 0: answers never read the evidence")
            ans = self.own_answer(question, options)
        elif weigh and g.generated_weight < 1.0:
            dec, ans = self.weighed_generate(question, options, evidence, rel, g.generated_weight)
        else:
            dec = use_decision(rel, g.min_relevance)
            ans = self.generate(question, options, evidence)
        self.record_gate(res, dec, ans)
        return ans

    def letter_first(self) -> bool:
        """Whether this method's multiple-choice letter comes before its rationale (a chain-of-thought
        method with ``apply.choice_rationale = "after"``): then the letter can be asked alone."""
        return self.s.cot and self.engine.config.apply.choice_rationale == "after"

    def evidence_stands(self, rel: Optional[float], why: str) -> GateDecision:
        """The evidence's answer stands because the two could not be weighed (``why``)."""
        dec = use_decision(rel, self.engine.config.gate.min_relevance)
        dec.reason += "; " + why
        return dec

    def weighed_generate(self, question: str, options: dict[str, str], evidence: list[EvidenceItem],
                         rel: Optional[float], weight: float) -> tuple[GateDecision, Answer]:
        """Generated mode, multiple choice: the letter the model writes without the evidence and
        the answer it writes with it; where they differ, the combined option scores (one prefill
        each) pick between them (:func:`medr2.apply.gate.decide_generated`)."""
        own = self.own_answer(question, options, explain=False)
        ans = self.generate(question, options, evidence)
        if ans.method in FAILED and own.method not in FAILED:
            why = ans.notes[0][:160] if ans.notes else ans.method
            return (skip_decision(rel, f"the answer with the evidence failed ({why})"),
                    self.whole_own(question, options, own))
        if own.method in FAILED or ans.method in FAILED:
            why = own.notes[0][:160] if own.notes else own.method
            return self.evidence_stands(rel, "both answers failed" if ans.method in FAILED else
                                        f"the answer without the evidence failed ({why}): nothing to weigh it against"), ans
        if own.answer == ans.answer:
            return agree_decision(rel, ans.answer, weight), ans
        lk = self.loglik()
        with stage("generate"):
            try:
                s0, _ = self.scores_without(question, options)
                s1, _ = lk.letter_scores(question, options, evidence)
                dec = decide_generated(own.answer, ans.answer, s0, s1, rel, weight)
            except (LLMError, ValueError) as err:  # no log-probabilities, or none finite
                return self.evidence_stands(rel, f"the written answers differ ({own.answer} / {ans.answer}) but the "
                                            f"generator gave no option log-probabilities to weigh them "
                                            f"({str(err)[:120]}): the evidence's stands"), ans
        return dec, (ans if dec.evidence_used else self.whole_own(question, options, own))

    def whole_own(self, question: str, options: dict[str, str], own: Answer) -> Answer:
        """The model's own answer with its rationale: ``own`` itself, or, where the rationale comes
        after the letter (``own`` is the letter alone), asked again with its explanation; a reply
        that no longer gives the same letter (a sampling or failing backend) leaves ``own`` as it
        was, with a note, so the answer is the one weighed."""
        if not self.letter_first():
            return own
        again = self.own_answer(question, options)
        if again.method in FAILED or again.answer != own.answer:
            own.notes.append(f"the explanation of option {own.answer} could not be had ({again.answer[:120]}); "
                             "the answer stands without one")
            return own
        return again

    def recommend(self, question: str, evidence: list[EvidenceItem]):
        """The recommendation answer (medr2.apply.recommend) of a free-text question whose
        evidence holds guideline recommendations; None when it holds none or ``[recommend]`` is
        off."""
        rec = self.engine.recommender
        if rec is None:
            return None
        with stage("recommend"):
            ra = rec.answer(question, evidence)
        return ra if ra.searched else None

    @staticmethod
    def record_gate(res: AskResult, dec: GateDecision, ans: Answer) -> None:
        res.gate, res.evidence_used = dec.to_dict(), dec.evidence_used
        ans.notes.append(f"evidence gate: {dec.reason}")

    def draft(self, question: str, options: dict[str, str], res: AskResult) -> Optional[str]:
        """The generator's own answer without evidence: the usefulness reference (never a gold
        label). In log-likelihood mode, the letter it scores highest with no evidence."""
        try:
            if self.use_loglik(options):
                a = self.loglik().answer(question, options, []).answer
            else:
                a = str(structured(self.engine.generator, draft_messages(question, options),
                                   answer_schema(0, options, cot=False, with_evidence=False),
                                   max_tokens=120)["answer"]).strip()
        except LLMError as err:
            res.notes.append(f"no draft answer for usefulness ({err}); f_u = 0")
            return None
        return f"{a}. {options[a]}" if options and a in options else a

    @staticmethod
    def finish(res: AskResult, ans: Optional[Answer]) -> None:
        if ans is None:
            return
        res.answer, res.rationale, res.citations = ans.answer, ans.rationale, ans.citations
        res.insufficient, res.method = ans.insufficient, ans.method
        res.notes.extend(ans.notes)
        res.recommendations, res.uncovered = list(ans.recommendations), list(ans.uncovered)
