"""Cited answers: chain of thought over numbered evidence, answer, citations [n] -> TextIDs.

The JSON schema only admits citation numbers of passages in the context, so a citation to
anything else is impossible by construction; :func:`check_citations` checks it again (and
strips ``[n]`` markers of the rationale that point outside the context), because an HTTP
server may ignore the schema. Multiple-choice questions get an option letter from an enum.

Without an LLM the documented deterministic path answers extractively: the sentence of the
kept evidence that best matches the question (free questions), or the option whose words the
kept evidence supports most (multiple choice), cited, and labelled ``extractive``.

Example::

    >>> from medr2.apply.answer import check_citations
    >>> check_citations([1, 3, 7], n=3)
    ([1, 3], [7])
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

from medr2.llm.base import LLM, LLMError, LLMOutputError, structured
from medr2.llm.salvage import salvage_looped

_MARK = re.compile(r"\[(\d+)\]")
_WORD = re.compile(r"[a-z0-9]+")


@dataclass
class EvidenceItem:
    n: int
    passage_id: str
    title: str
    source_type: str
    level: int
    text: str
    heading_path: list[str] = field(default_factory=list)  # where in its document (not shown to the model)
    relevance: Optional[float] = None  # the coarse reranker's calibrated relevance (None: no relevance model)

    def prompt_dict(self) -> dict[str, Any]:
        return {"n": self.n, "title": self.title, "source_type": self.source_type, "level": self.level,
                "text": self.text}


@dataclass
class Answer:
    answer: str
    rationale: str = ""
    citations: list[str] = field(default_factory=list)  # passage ids
    cited: list[int] = field(default_factory=list)  # evidence numbers
    insufficient: bool = False
    method: str = "llm"
    notes: list[str] = field(default_factory=list)
    recommendations: list[Any] = field(default_factory=list)  # medr2.schema.Recommendation
    uncovered: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_citations(numbers: list[int], n: int) -> tuple[list[int], list[int]]:
    """(valid, invalid) citation numbers for a context of n passages; valid ones deduplicated in order."""
    valid: list[int] = []
    invalid: list[int] = []
    for k in numbers:
        (valid if 1 <= k <= n else invalid).append(k)
    return list(dict.fromkeys(valid)), invalid


def strip_bad_marks(text: str, n: int) -> tuple[str, list[int]]:
    bad: list[int] = []

    def sub(m: re.Match) -> str:
        k = int(m.group(1))
        if 1 <= k <= n:
            return m.group(0)
        bad.append(k)
        return "[?]"

    return _MARK.sub(sub, text), bad


def answer_schema(n: int, options: dict[str, str], cot: bool, with_evidence: bool = True) -> dict[str, Any]:
    props: dict[str, Any] = {}
    if cot:
        props["rationale"] = {"type": "string"}
    props["answer"] = ({"type": "string", "enum": list(options)} if options
                       else {"type": "string", "minLength": 1, "maxLength": 600})
    if with_evidence:
        props["citations"] = {"type": "array", "items": {"type": "integer", "enum": list(range(1, n + 1))},
                              "maxItems": n} if n else {"type": "array", "maxItems": 0}
        props["insufficient"] = {"type": "boolean"}
    return {"type": "object", "additionalProperties": False, "required": list(props), "properties": props}


# the explanation of a letter already chosen (apply.choice_rationale = "after")
RATIONALE_SCHEMA: dict[str, Any] = {"type": "object", "additionalProperties": False, "required": ["rationale"],
                                    "properties": {"rationale": {"type": "string", "minLength": 1}}}
AFTER = "the option was chosen without a chain of thought; the rationale explains it afterwards (apply.choice_rationale)"


def explain_choice(llm: LLM, messages: list[dict[str, str]], reply: dict[str, Any], options: dict[str, str],
                   with_evidence: bool, max_tokens: int) -> tuple[str, Optional[str]]:
    """The rationale of the option ``reply`` chose, asked for after it (the letter is the one the
    model gives without a chain of thought), and a note when it is not the model's whole reply: a
    looping explanation is cut before its loop; one that never came, in the form asked or at all
    (the longer prompt did not fit, the backend failed), leaves the chosen answer without a
    rationale: the letter already given is never lost to its explanation."""
    from medr2.apply.prompts import explain_messages

    msgs = explain_messages(messages, reply, options, with_evidence)
    try:
        return str(structured(llm, msgs, RATIONALE_SCHEMA, max_tokens=max_tokens, retries=0)["rationale"]), None
    except LLMOutputError as e:
        kept = salvage_looped(llm, msgs, RATIONALE_SCHEMA, e, max_tokens=max_tokens)
        if kept is not None:
            return str(kept["rationale"]), EXPLANATION_CUT
        err: LLMError = e
    except LLMError as e:
        err = e
    return "", f"no rationale for option {reply.get('answer')} ({str(err)[:160]}); the answer stands without one"


EXPLANATION_CUT = "the explanation started repeating itself: it is kept up to the first repeated sentence"


SALVAGED = ("the chain of thought started repeating itself: it is kept up to the first repeated sentence and "
            "the answer was continued from there")

# Answer.method of an answer the generator could not give: the call could not be made, or the
# model never answered in the form asked
FAILED = ("error", "invalid_output")

# generate: the cited answer (with a chain of thought when the method has one); loglik: the option
# letter the generator scores highest (prefill only); loglik-cal: the same, calibrated against a
# content-free prompt (medr2.apply.loglik).
ANSWER_MODES = ("generate", "loglik", "loglik-cal")


def failed_answer(err: Exception) -> Answer:
    """The explicit answer when generation fails: ``error`` when the call could not be made
    (server, model file), ``invalid_output`` when the model never answered in the form asked.

    >>> from medr2.llm.base import LLMOutputError
    >>> failed_answer(LLMOutputError("no JSON")).method
    'invalid_output'
    """
    return Answer(f"Insufficient evidence: the generator failed ({err}).", insufficient=True,
                  method="invalid_output" if isinstance(err, LLMOutputError) else "error", notes=[str(err)])


class CitedAnswerer:
    """The cited answer over numbered evidence. With ``cot`` a chain of thought precedes the answer;
    with ``rationale_after`` as well (``apply.choice_rationale = "after"``), a multiple-choice
    question gets the letter and citations the model gives without a chain of thought, and then,
    in a second turn of the same conversation, the rationale that explains them."""

    def __init__(self, llm: Optional[LLM], cot: bool = True, few_shot: int = 2, max_tokens: int = 400,
                 retries: int = 2, rationale_after: bool = False):
        self.llm = llm
        self.cot = cot
        self.few_shot = few_shot
        self.max_tokens = max_tokens
        self.retries = retries
        self.rationale_after = rationale_after

    def answer(self, question: str, options: dict[str, str], evidence: list[EvidenceItem],
               graph: Optional[str] = None, recommendations: Optional[str] = None) -> Answer:
        """``graph``: the tier-conditioned knowledge-graph block (:mod:`medr2.apply.kg_prompt`);
        ``recommendations``: the applicable guideline recommendations, the structure the answer
        is to follow (:func:`medr2.apply.recommend_answer.prompt_block`)."""
        from medr2.apply.prompts import answer_messages

        if not evidence:
            return Answer("Insufficient evidence: nothing relevant was found in the index for this question.",
                          insufficient=True, method="rule", notes=["no evidence passed appraisal"])
        if self.llm is None:
            return extractive_answer(question, options, evidence)
        items = [e.prompt_dict() for e in evidence]
        # "after": the letter exactly as without a chain of thought, then its explanation
        after = self.cot and self.rationale_after and bool(options)
        cot = self.cot and not after
        schema = answer_schema(len(evidence), options, cot)
        msgs = answer_messages(question, options, items, cot, self.few_shot, graph, recommendations)
        try:
            out = structured(self.llm, msgs, schema, max_tokens=self.max_tokens, retries=self.retries)
        except LLMOutputError as e:  # a call that could not be made at all is not repaired by another
            if not cot:
                raise
            kept = salvage_looped(self.llm, msgs, schema, e, max_tokens=self.max_tokens)
            if kept is not None:
                ans = finish(kept, evidence, options)
                ans.notes.insert(0, SALVAGED)
                return ans
            # bounded repair: a rationale that overran max_tokens leaves invalid JSON; answer without it
            out = structured(self.llm, answer_messages(question, options, items, False, self.few_shot, graph,
                                                       recommendations),
                             answer_schema(len(evidence), options, False), max_tokens=self.max_tokens, retries=0)
            ans = finish(out, evidence, options)
            ans.notes.insert(0, f"no valid chain of thought ({str(e)[:160]}); answered without one")
            return ans
        ans = finish(out, evidence, options)  # citations and sufficiency as the reply gave them
        if after:
            why, note = explain_choice(self.llm, msgs, out, options, True, self.max_tokens)
            ans.rationale, bad = strip_bad_marks(why, len(evidence))
            ans.notes[:0] = [AFTER] + ([note] if note else []) + (
                [f"removed rationale markers outside the context: {bad}"] if bad else [])
        return ans


def finish(out: dict[str, Any], evidence: list[EvidenceItem], options: dict[str, str]) -> Answer:
    notes = []
    valid, invalid = check_citations([int(k) for k in out.get("citations", [])], len(evidence))
    if invalid:
        notes.append(f"removed citations to passages not in the context: {invalid}")
    rationale, bad = strip_bad_marks(out.get("rationale", ""), len(evidence))
    if bad:
        notes.append(f"removed rationale markers outside the context: {bad}")
    # markers in the rationale count as citations too
    valid = list(dict.fromkeys(valid + [int(m) for m in _MARK.findall(rationale)]))
    insufficient = bool(out.get("insufficient", False))
    answer = str(out["answer"]).strip()
    if not valid and not insufficient:
        insufficient = True
        notes.append("the model cited no evidence: the answer is marked unsupported")
    if insufficient and options:
        notes.append(f"the evidence is insufficient; option {answer} is the model's unsupported choice")
    by_n = {e.n: e.passage_id for e in evidence}
    return Answer(answer, rationale, [by_n[k] for k in valid], valid, insufficient, "llm", notes)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


def extractive_answer(question: str, options: dict[str, str], evidence: list[EvidenceItem]) -> Answer:
    q = _words(question)
    if options:
        ev = [(e, _words(e.text)) for e in evidence]
        scored = {k: sum(len(_words(v) & w) / (1 + len(_words(v))) for _, w in ev) for k, v in options.items()}
        best = max(scored, key=scored.get)
        support = [e.n for e, w in ev if _words(options[best]) & w]
        if scored[best] == 0:
            return Answer(best, "No LLM is configured and no evidence mentions any option.", [], [], True,
                          "extractive", ["no LLM: deterministic option matching"])
        return Answer(best, f"Option {best} shares the most terms with the evidence {support}.",
                      [e.passage_id for e in evidence if e.n in support], support, False, "extractive",
                      ["no LLM: deterministic option matching, not reasoning"])
    best_s, best_e, best_score = "", evidence[0], -1.0
    for i, e in enumerate(evidence[:5]):  # the best-appraised passages, rank-discounted: weak evidence misleads
        for s in re.split(r"(?<=[.!?])\s+", e.text):
            w = _words(s)
            score = len(w & q) / (1 + len(w) ** 0.5) / (1 + 0.15 * i)
            if score > best_score:
                best_s, best_e, best_score = s.strip(), e, score
    if best_score <= 0:
        return Answer("Insufficient evidence: no passage matches the question.", "", [], [], True, "extractive",
                      ["no LLM: deterministic sentence selection"])
    return Answer(f"{best_s} [{best_e.n}]", "", [best_e.passage_id], [best_e.n], False, "extractive",
                  ["no LLM: the answer is the best-matching evidence sentence, quoted"])


def direct_answer(llm: Optional[LLM], question: str, options: dict[str, str], cot: bool, max_tokens: int,
                  rationale_after: bool = False) -> Answer:
    """No retrieval: the generator answers from its own knowledge (baseline). ``rationale_after``
    as in :class:`CitedAnswerer`."""
    from medr2.apply.prompts import direct_messages

    if llm is None:
        raise LLMError("the direct pipeline needs an LLM; none is configured")
    notes = ["no retrieval: answer from the model's own knowledge, uncited"]
    after = cot and rationale_after and bool(options)  # the letter exactly as without a chain of thought, then why
    cot = cot and not after
    msgs, schema = direct_messages(question, options, cot), answer_schema(0, options, cot, with_evidence=False)
    try:
        out = structured(llm, msgs, schema, max_tokens=max_tokens)
    except LLMOutputError as e:
        if not cot:
            raise
        kept = salvage_looped(llm, msgs, schema, e, max_tokens=max_tokens)
        if kept is not None:
            return Answer(str(kept["answer"]).strip(), kept.get("rationale", ""), [], [], False, "llm",
                          [SALVAGED, *notes])
        # as CitedAnswerer: a rationale that overran max_tokens leaves invalid JSON; answer without it
        out = structured(llm, direct_messages(question, options, False),
                         answer_schema(0, options, False, with_evidence=False), max_tokens=max_tokens, retries=0)
        notes.insert(0, f"no valid chain of thought ({str(e)[:160]}); answered without one")
    why = out.get("rationale", "")
    if after:
        why, note = explain_choice(llm, msgs, out, options, False, max_tokens)
        notes[:0] = [AFTER, *([note] if note else [])]
    return Answer(str(out["answer"]).strip(), why, [], [], False, "llm", notes)
