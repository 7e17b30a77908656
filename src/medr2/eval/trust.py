"""Trust metrics of the guideline-KG paper, as pure functions over one answer and the knowledge
its question requires, plus the comparison of answer modes on a question set with required
recommendations (bench/data/ngc_questions.jsonl).

Per answer:

* **required-knowledge omission**: share of the required recommendations that no cited passage
  holds (a passage holds one when it contains its text, whitespace-normalised); beside it the
  share **required in context**, which some passage of the context holds (what the answer could
  cite: passage mode's against full mode's, issue 36);
* **conflict**: a clause of the answer recommends against what a clause of a required
  recommendation recommends, or the reverse, about the same thing (half the content words of the
  shorter in common); quotes of required knowledge, conditions, remarks about what the evidence
  says and counselling on a fact are not conflicts;
* **unsupported-claim rate**: share of the answer's sentences (answer and rationale) that cite
  nothing, or cite only passages sharing under ``min_overlap`` of the sentence's content words;
  a sentence that only remarks on what the evidence lacks ("the guideline does not mention X")
  claims nothing and is not counted;
* **invalid-citation rate**: share of citations to passages that were not in the context;
* **evidence-grounded precision**: share of cited passages that hold required knowledge.

Modes (``medr2 eval trust``): ``no_rag`` (direct answer), ``passage`` (vanilla RAG),
``full`` (quality-weighted graph + tier-conditioned prompt) and ``oracle_kg`` (the passages of
the required recommendations given as the only evidence).

Example::

    >>> from medr2.eval.trust import omission, unsupported_claim_rate
    >>> omission(["Offer metformin."], ["First, offer metformin. Then..."])
    0.0
    >>> unsupported_claim_rate([("Metformin is first-line [1].", [1]), ("It cures all.", [])],
    ...                        {1: "Offer metformin as first-line treatment."})
    0.5
"""

from __future__ import annotations

import re
from typing import Iterable, Optional, Sequence

from medr2.kg.extract.base import sentences as split_sentences
from medr2.kg.extract.structured import polarity_of

_WORD = re.compile(r"[a-z0-9]+")
_STOP = {"the", "a", "an", "of", "in", "for", "to", "and", "or", "with", "is", "are", "be", "should", "this", "that",
         "it", "its", "on", "as", "by", "at", "from", "was", "were", "can", "may", "not", "no", "which", "who", "what",
         "answer", "evidence", "passage", "passages", "because", "so", "than", "there", "these", "those", "their"}
_CITE = re.compile(r"\[(\d+)\]")


def squash(text: str) -> str:
    return " ".join(text.split()).lower()


def holds(passage: str, required: str) -> bool:
    """The passage holds the required text (or, for a text that segmentation split across
    passages, its first or last 100 characters)."""
    r, p = squash(required), squash(passage)
    return r in p or (len(r) > 100 and (r[:100] in p or r[-100:] in p))


def omission(required: Sequence[str], cited_texts: Sequence[str]) -> float:
    """Share of required items held by no cited passage (0 when nothing is required)."""
    if not required:
        return 0.0
    missing = [r for r in required if not any(holds(p, r) for p in cited_texts)]
    return len(missing) / len(required)


def required_in_context(required: Sequence[str], context_texts: Sequence[str]) -> Optional[float]:
    """Share of the required items some passage of the context holds: what the answer could have
    cited (omission measures what it did); None when nothing is required.

    >>> required_in_context(["Offer metformin.", "Avoid sulfonylureas."], ["First, offer metformin."])
    0.5
    """
    return None if not required else 1.0 - omission(required, context_texts)


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2}


def claim_sentences(answer: str, rationale: str) -> list[tuple[str, list[int]]]:
    """(sentence, cited numbers) for each claim of the rationale and the answer: each sentence with
    two content words or more, less those whose every clause remarks on what the evidence lacks.

    Example::

        >>> claim_sentences("Insufficient evidence: the passages do not mention C. difficile.",
        ...                 "Offer NAAT for C. difficile [1]. Retest is not advised.")
        [('Offer NAAT for C. difficile [1].', [1]), ('Retest is not advised.', [])]
    """
    out = []
    for text in (rationale, answer):
        for _, _, s in split_sentences(text or ""):
            if len(content_words(s)) >= 2 and not all(_ABOUT_SOURCE.search(c) for c in clauses(s)):
                out.append((s, [int(n) for n in _CITE.findall(s)]))
    return out


def unsupported_claim_rate(sentences: Sequence[tuple[str, Sequence[int]]], passages: dict[int, str],
                           min_overlap: float = 0.3, fallback: Sequence[int] = ()) -> float:
    """Share of claims without support: no citation (nor an answer-level citation in
    ``fallback``), or cited passages sharing fewer than ``min_overlap`` of its content words."""
    if not sentences:
        return 0.0
    bad = 0
    for s, cites in sentences:
        nums = list(cites) or list(fallback)
        words = content_words(_CITE.sub(" ", s))
        best = max((len(words & content_words(passages.get(n, ""))) / len(words) for n in nums), default=0.0) \
            if words else 1.0
        bad += best < min_overlap
    return bad / len(sentences)


def invalid_citation_rate(cited: Sequence[str], context: Iterable[str]) -> Optional[float]:
    ctx = set(context)
    return (sum(c not in ctx for c in cited) / len(cited)) if cited else None


def grounded_precision(cited_texts: Sequence[str], required: Sequence[str]) -> Optional[float]:
    if not cited_texts:
        return None
    return sum(any(holds(p, r) for r in required) for p in cited_texts) / len(cited_texts)


def _stems(text: str) -> set[str]:
    return {w[:-1] if len(w) > 4 and w.endswith("s") and not w.endswith("ss") else w
            for w in content_words(_CITE.sub(" ", text))}


# a sentence is judged clause by clause: "recommends X, but it does not specify a benefit" holds
# a recommendation for X and a remark about the source, not a recommendation against X
_CLAUSE = re.compile(r"\s*;\s+|,?\s+(?=(?:but|while|whereas|although|though|however|if|unless|when|except)\b)", re.I)
# clauses with no polarity of their own: a condition ("if it does not work"), a remark about what
# the evidence says or lacks, or counselling on a fact ("advise women that X could be reduced")
_CONDITION = re.compile(r"(?i)^(?:if|unless|except|when|although|though)\b")
_ABOUT_SOURCE = re.compile(
    r"(?i)\b(?:do|does|did)\s+not\s+(?:specify|provide|mention|state|address|include|contain|discuss|say|describe|"
    r"cover|report|give|list|define)\b|\bno (?:information|mention|data)\b|"
    r"\bnot (?:mentioned|specified|stated|addressed|reported|discussed|covered)\b")
_COUNSEL = re.compile(r"(?i)\b(?:advise|inform|tell|counsel)(?:s|d|ed)?\b.*\bthat\b")


def clauses(text: str) -> list[str]:
    """The clauses of a text, citation marks removed: sentences, split again before "but",
    "while", "although", "if", "when", "unless" and at ";". A clause opened by a condition keeps
    what follows the condition's comma ("if indicated, regular use of moisturizers") as a clause of
    its own."""
    out = []
    for _, _, sent in split_sentences(text):
        for c in _CLAUSE.split(_CITE.sub(" ", sent)):
            c = c.strip(" -*\t,")
            if _CONDITION.match(c) and "," in c:
                cond, main = c.split(",", 1)
                out += [cond.strip(), main.strip(" -*\t,")]
            elif c:
                out.append(c)
    return [c for c in out if c]


def clause_polarity(clause: str) -> int:
    """The polarity of a recommendation clause (:func:`polarity_of`), 0 for a condition, a remark
    about the source or counselling on a fact."""
    if _CONDITION.match(clause) or _ABOUT_SOURCE.search(clause) or _COUNSEL.search(clause):
        return 0
    return polarity_of(clause)


def conflicts(answer: str, required: Sequence[str], min_overlap: float = 0.5) -> bool:
    """A clause of the answer recommends against what a clause of a required recommendation
    recommends (or the reverse) about the same thing: a required clause it shares the most
    content words with (at least ``min_overlap`` of the shorter one's; on a tie, any of them) has
    the opposite polarity. A sentence quoting required knowledge is never a conflict
    (a question often requires a recommendation and its exception, of opposite polarities), nor is
    a condition, a remark about what the evidence says, or counselling (:func:`clause_polarity`).

    Example::

        >>> req = ["Offer thymectomy to increase the probability of remission."]
        >>> conflicts("Thymectomy should not be offered for remission.", req)
        True
        >>> conflicts("The guideline recommends thymectomy for remission, but it does not specify "
        ...           "the probability of remission.", req)
        False
    """
    reqs = [(clause_polarity(c), _stems(c)) for r in required for c in clauses(r)]
    reqs = [(rp, rw) for rp, rw in reqs if rp != 0 and rw]
    for _, _, sent in split_sentences(answer):
        bare = _CITE.sub(" ", sent).strip(" -*\t")
        if not bare or any(holds(bare, r) or holds(r, bare) for r in required):
            continue
        for clause in clauses(sent):
            pol, words = clause_polarity(clause), _stems(clause)
            if pol == 0 or not words or not reqs:
                continue
            # the clause is about the required clause(s) it shares most words with: a paraphrase of
            # "recommends against dual therapy in AF" is not in conflict with "anticoagulate in AF"
            overlap = [(len(words & rw) / min(len(words), len(rw)), rp) for rp, rw in reqs]
            best = max(o for o, _ in overlap)
            if best >= min_overlap and any(rp == -pol for o, rp in overlap if o == best):
                return True
    return False


def answer_conflicts(res: dict, required: Sequence[str]) -> bool:
    """:func:`conflicts` over an answer and its chain of thought (``medr2 ask --json`` layout or a
    stored trust row)."""
    return conflicts(f"{res.get('answer') or ''} {res.get('rationale') or ''}", required)


def mean(xs: Iterable[Optional[float]]) -> Optional[float]:
    vals = [x for x in xs if x is not None]
    return sum(vals) / len(vals) if vals else None


MODES = {"no_rag": "direct", "passage": "vanilla_rag", "full": "kg", "oracle_kg": None}


def score_answer(res: dict, required: Sequence[str]) -> dict:
    """The trust metrics of one answer (``medr2 ask --json`` layout) against its required texts."""
    ev = res.get("evidence") or []
    by_id = {e["passage_id"]: e for e in ev}
    context = [e["passage_id"] for e in ev if e.get("kept")]
    cited = list(res.get("citations") or [])
    cited_texts = [by_id[c]["text"] for c in cited if c in by_id]
    numbered = {e["n"]: e["text"] for e in ev if e.get("kept") and e.get("n")}
    sentences = claim_sentences(res.get("answer", ""), res.get("rationale", ""))
    fallback = [e["n"] for e in ev if e.get("passage_id") in cited and e.get("n")]
    return {
        "omission": omission(required, cited_texts),
        "required_in_context": required_in_context(required, [e["text"] for e in ev if e.get("kept")]),
        "conflict": answer_conflicts(res, required),
        "unsupported": unsupported_claim_rate(sentences, numbered, fallback=fallback),
        "invalid_citation": invalid_citation_rate(cited, context),
        "grounded_precision": grounded_precision(cited_texts, required),
        "insufficient": bool(res.get("insufficient")),
        "n_citations": len(cited),
    }


def rescore(row: dict, required: Sequence[str]) -> dict:
    """:func:`score_answer` over a stored trust row, so a revised metric applies to kept rows. The
    row's evidence is its context; a row written before the numbers were stored (2026-12-03) lists
    it in context order, so its position gives the number."""
    ev = [{"passage_id": e.get("passage_id"), "text": e.get("text", ""), "kept": True, "n": e.get("n") or i}
          for i, e in enumerate(row.get("evidence") or [], 1)]
    return score_answer({**row, "evidence": ev, "insufficient": row["metrics"].get("insufficient")}, required)


def summarize(rows: Sequence[dict]) -> dict:
    """Means over the answerable questions' rows; ``abstention_rate`` is the share of the
    unanswerable questions' rows that said the evidence is insufficient (None when there are
    none), and ``insufficient_rate`` over answerable ones is the false abstention."""
    unanswerable = [r for r in rows if r.get("unanswerable")]
    rows = [r for r in rows if not r.get("unanswerable")]
    m = [r["metrics"] for r in rows]
    return {"n": len(rows), "n_unanswerable": len(unanswerable),
            "abstention_rate": mean(float(r["metrics"]["insufficient"]) for r in unanswerable),
            "omission": mean(x["omission"] for x in m), "required_in_context": mean(x.get("required_in_context") for x in m),
            "conflict_rate": mean(float(x["conflict"]) for x in m), "unsupported": mean(x["unsupported"] for x in m),
            "invalid_citation": mean(x["invalid_citation"] for x in m),
            "grounded_precision": mean(x["grounded_precision"] for x in m),
            "insufficient_rate": mean(float(x["insufficient"]) for x in m),
            "seconds": mean(r.get("seconds") for r in rows),
            "seconds_uncached": mean(r.get("seconds") for r in rows if answered_fresh(r.get("usage")))}


def answered_fresh(usage: Optional[dict]) -> bool:
    """Whether a row's model calls all ran (none came from the LLM cache), so its seconds time the
    method rather than a cache read. Rows without usage (the oracle, older runs) are not."""
    if not usage or not usage.get("calls"):
        return False
    return not any((s or {}).get("cached_calls") for s in (usage.get("stages") or {}).values())
