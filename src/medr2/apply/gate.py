"""The evidence gate (issue 35, "do no harm"): per question, whether the packed evidence should
decide the answer, as pure functions over signals the pipeline already has.

Two signals:

* **relevance**: the best calibrated relevance (the coarse reranker's probability that a passage
  bears on the question) among the passages that reached the context; None without a relevance
  model;
* in log-likelihood mode, the option-letter log-probabilities **without** evidence (``s0``, one
  short prefill, the same prompt as direct answering) and **with** it (``s1``).

The rule (:func:`decide`): evidence whose best relevance is below ``gate.min_relevance`` is not
used (the model answers from ``s0``, or without evidence in generated mode), nor, with
``gate.confidence_gain``, evidence that leaves the model no surer of its best option than it is
without it (``max p1 <= max p0``); otherwise the two option distributions are combined log-linearly,

    log p(x) = (1 - lam) * log p0(x) + lam * log p1(x),    lam = gate.evidence_weight,

so evidence that leaves the model unsure does not overturn a confident answer, and evidence that
makes it confident does. ``lam = 1`` is plain RAG. Both constants are chosen on dev pools
(``bench/tune_gate.py``; bench/README.md says which).

Generated answers to multiple-choice questions (:func:`decide_generated`) are gated the same way
with their own weight (``gate.generated_weight``): the model writes its letter without evidence
(``a0``) and with it (``a1``); where the two differ, the same two option distributions (one
prefill each) are combined and the one of the two written letters that scores higher is the
answer. A third letter neither answer wrote is never chosen: the answer shown is one the model
wrote, with its own rationale and citations.

Example::

    >>> from medr2.apply.gate import decide, log_softmax
    >>> d = decide({"A": -0.2, "B": -2.0}, {"A": -1.0, "B": -0.9}, relevance=0.6, min_relevance=0.2, weight=0.5)
    >>> d.answer, d.mode, d.evidence_used, d.answer_without, d.answer_with
    ('A', 'combined', True, 'A', 'B')
    >>> decide({"A": -0.2, "B": -2.0}, {"A": -3.0, "B": -0.1}, relevance=0.05, min_relevance=0.2, weight=0.5).mode
    'none'
    >>> unsure = decide({"A": -0.2, "B": -2.0}, {"A": -1.0, "B": -0.9}, 0.6, 0.0, 0.5, confidence_gain=True)
    >>> unsure.answer, unsure.evidence_used, unsure.reason[:44]
    ('A', False, 'the evidence did not make the model surer (b')
    >>> decide({"A": -0.7, "B": -0.7}, {"A": -3.0, "B": -0.1}, 0.6, 0.0, 0.5, confidence_gain=True).answer
    'B'
    >>> g = decide_generated("A", "B", {"A": -0.2, "B": -2.0, "C": -3.0}, {"A": -1.0, "B": -0.9, "C": -2.0}, 0.6, 0.5)
    >>> g.answer, g.evidence_used
    ('A', False)
    >>> round(sum(math.exp(v) for v in log_softmax({"A": -1.0, "B": -2.0}).values()), 6)
    1.0
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

MODES = ("evidence", "combined", "none")


def log_softmax(scores: dict[str, float]) -> dict[str, float]:
    """Log-probabilities renormalised over the options (letters with -inf stay -inf)."""
    finite = [v for v in scores.values() if v != float("-inf")]
    if not finite:
        raise ValueError("no option has a finite score")
    top = max(finite)
    z = top + math.log(sum(math.exp(v - top) for v in finite))
    return {k: v - z for k, v in scores.items()}


def combine(s0: dict[str, float], s1: dict[str, float], weight: float) -> dict[str, float]:
    """(1 - weight) * log p0 + weight * log p1 over the options of both (each renormalised first)."""
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"the evidence weight must be in [0, 1], got {weight}")
    if set(s0) != set(s1):
        raise ValueError(f"the two distributions score different options: {sorted(s0)} and {sorted(s1)}")
    l0, l1 = log_softmax(s0), log_softmax(s1)
    out = {}
    for k in s0:
        a = 0.0 if weight == 1.0 else (1.0 - weight) * l0[k]
        b = 0.0 if weight == 0.0 else weight * l1[k]
        out[k] = a + b
    return out


def best_letter(scores: dict[str, float]) -> str:
    """The highest-scoring option (the first letter on ties)."""
    return max(sorted(scores), key=lambda k: (scores[k], -ord(k[0])))


def confidence(scores: dict[str, float]) -> float:
    """The probability of the best option after renormalising over the options."""
    return math.exp(max(log_softmax(scores).values()))


@dataclass
class GateDecision:
    """What the gate decided for one answer (``AskResult.gate``)."""

    mode: str  # "evidence" | "combined" | "none"
    evidence_used: bool
    reason: str
    relevance: Optional[float]  # best relevance in the context (None: no relevance model)
    weight: float  # lam actually applied (0 when the evidence was not used)
    answer: str = ""  # the gated answer (log-likelihood mode)
    answer_without: str = ""  # the option the model picks without evidence
    answer_with: str = ""  # ... and with it
    confidence_without: Optional[float] = None
    confidence_with: Optional[float] = None
    # the option letters' log-probabilities (renormalised over the options) without / with evidence
    scores_without: dict[str, float] = field(default_factory=dict)
    scores_with: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        def r(v):
            if isinstance(v, float):
                return round(v, 4)
            return {k: round(x, 4) for k, x in v.items()} if isinstance(v, dict) else v
        return {k: r(v) for k, v in asdict(self).items()}


def relevance_gate(relevance: Optional[float], min_relevance: float) -> Optional[str]:
    """Why the evidence is not used on relevance grounds, or None when it may be."""
    if relevance is not None and relevance < min_relevance:
        return (f"no passage in the context bears on the question (best relevance {relevance:.3f} "
                f"< gate.min_relevance {min_relevance})")
    return None


def decide(s0: dict[str, float], s1: dict[str, float], relevance: Optional[float], min_relevance: float,
           weight: float, confidence_gain: bool = False) -> GateDecision:
    """The log-likelihood gate: ``s0``/``s1`` option scores without/with evidence. With
    ``confidence_gain`` the evidence counts only where it makes the model surer of its best option
    (``confidence(s1) > confidence(s0)``); otherwise the answer is the one without it."""
    a0, a1 = best_letter(s0), best_letter(s1)
    c0, c1 = confidence(s0), confidence(s1)
    common = dict(relevance=relevance, answer_without=a0, answer_with=a1, confidence_without=c0,
                  confidence_with=c1, scores_without=log_softmax(s0), scores_with=log_softmax(s1))
    why_not = relevance_gate(relevance, min_relevance)
    if not why_not and weight > 0.0 and confidence_gain and not c1 > c0:
        why_not = (f"the evidence did not make the model surer (best option p {c1:.2f} with it, {c0:.2f} without; "
                   "gate.confidence_gain)")
        # where the evidence pointed: the same option, less surely (it agreed), or another one
        why_not += (f"; with it the model picks the same option ({a1})" if a1 == a0 else
                    f"; with it the model would pick {a1}")
    if why_not or weight == 0.0:
        reason = why_not or ("evidence weight 0 (gate.evidence_weight, or gate.language_weights for the question's "
                             "language): answers never read the evidence")
        return GateDecision("none", False, reason + f"; answered without it ({a0})", weight=0.0, answer=a0, **common)
    if weight == 1.0:
        return GateDecision("evidence", True, f"the evidence decides (evidence weight 1: gate.evidence_weight, or "
                                              f"gate.language_weights): {a1}", weight=1.0,
                            answer=a1, **common)
    ans = best_letter(combine(s0, s1, weight))
    if a0 == a1:
        how = f"with and without the evidence the model picks {a0}"
    elif ans == a1:
        how = f"the evidence changed the answer from {a0} (p {c0:.2f}) to {a1} (p {c1:.2f})"
    elif ans == a0:
        how = f"the evidence pointed to {a1} (p {c1:.2f}) but did not overturn {a0} (p {c0:.2f})"
    else:
        how = f"without the evidence {a0}, with it {a1}; combined {ans}"
    return GateDecision("combined", True, f"{1 - weight:.2f} x no-evidence + {weight:.2f} x evidence log-probabilities: "
                        + how, weight=weight, answer=ans, **common)


def decide_generated(a0: str, a1: str, s0: dict[str, float], s1: dict[str, float], relevance: Optional[float],
                     weight: float) -> GateDecision:
    """Generated mode, the written letters differ: ``a0`` without evidence, ``a1`` with it; ``s0``/``s1``
    the option scores without/with evidence. The written letter with the higher combined score is
    the answer (ties to the evidence's); ``evidence_used`` is whether that is ``a1``."""
    if a0 == a1:
        raise ValueError(f"the two written answers agree ({a0}): nothing to weigh")
    comb = combine(s0, s1, weight)
    for a in (a0, a1):
        if a not in comb:
            raise ValueError(f"the written answer {a!r} is not one of the scored options {sorted(comb)}")
    use = comb[a1] >= comb[a0]
    ans = a1 if use else a0
    c0, c1 = confidence(s0), confidence(s1)
    how = (f"the evidence changed the answer from {a0} to {a1}" if use else
           f"the evidence pointed to {a1} but did not overturn {a0}")
    return GateDecision("combined", use, f"written answers without / with the evidence {a0} / {a1}; "
                        f"{1 - weight:.2f} x no-evidence + {weight:.2f} x evidence log-probabilities score "
                        f"{a0} {comb[a0]:.2f}, {a1} {comb[a1]:.2f}: " + how, relevance=relevance,
                        weight=weight if use else 0.0, answer=ans, answer_without=a0, answer_with=a1,
                        confidence_without=c0, confidence_with=c1, scores_without=log_softmax(s0),
                        scores_with=log_softmax(s1))


def agree_decision(relevance: Optional[float], letter: str, weight: float) -> GateDecision:
    """Generated mode, the written letters agree with and without the evidence (no prefill needed)."""
    return GateDecision("combined", True, f"with and without the evidence the model writes {letter}", relevance=relevance,
                        weight=weight, answer=letter, answer_without=letter, answer_with=letter)


def skip_loglik(s0: dict[str, float], relevance: Optional[float], reason: str) -> GateDecision:
    """Log-likelihood mode, evidence not used on relevance grounds (its prefill is skipped)."""
    a0 = best_letter(s0)
    return GateDecision("none", False, reason + f"; answered without it ({a0})", relevance=relevance, weight=0.0,
                        answer=a0, answer_without=a0, confidence_without=confidence(s0), scores_without=log_softmax(s0))


def skip_decision(relevance: Optional[float], reason: str) -> GateDecision:
    """Generated mode, evidence not used (the answer is the model's own, uncited)."""
    return GateDecision("none", False, reason + "; answered without it", relevance=relevance, weight=0.0)


def use_decision(relevance: Optional[float], min_relevance: float) -> GateDecision:
    """Generated mode, evidence used."""
    why = ("no relevance model scored the passages" if relevance is None else
           f"best relevance {relevance:.3f} >= gate.min_relevance {min_relevance}")
    return GateDecision("evidence", True, f"the answer reads the evidence ({why})", relevance=relevance, weight=1.0)
