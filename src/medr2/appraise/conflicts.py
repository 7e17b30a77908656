"""Conflict filtering (Med-R2): when two passages contradict each other, drop the one with the
lower evidence level (higher e) and record what was dropped and why. Equal levels keep both
and flag the conflict, so the answer can say the evidence disagrees.

* Offline rules, polarity- and threshold-aware: two sentences from passages of different
  documents conflict when they share at least two content terms, carry opposite
  recommendation/effect polarity, and the ranges they state (``below 30``, ``45 or higher``,
  ``between 30 and 44``) overlap, or either states none. A document is taken to agree with itself.
* LLM: the generator judges candidate pairs (those sharing terms) under a JSON schema.

Example::

    >>> from medr2.appraise.conflicts import sentence_claims, claims_conflict
    >>> a = sentence_claims("Metformin should be stopped when the eGFR falls below 60.")
    >>> b = sentence_claims("Metformin can be continued at a reduced dose down to an eGFR of 30.")
    >>> claims_conflict(a[0], b[0]) is not None
    True
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Optional

from medr2.llm.base import LLM, LLMError, structured

NEGATIVE = re.compile(r"\b(not (be )?(recommended|indicated|used|effective|safe|beneficial)|contraindicated|"
                      r"should not|must not|do not use|avoid(ed)?|unsafe|ineffective|no (significant )?"
                      r"(benefit|effect|difference|improvement|reduction)|did not (reduce|improve|lower)|"
                      r"does not (reduce|improve|lower)|(should be|must be|was) (stopped|discontinued|withheld)|"
                      r"discontinue|increase[sd]? (the )?(risk|mortality)|harmful)\b", re.I)
POSITIVE = re.compile(r"\b(recommended|is indicated|are indicated|should be (used|given|offered|started|continued)|"
                      r"first-line|(is|are|was|remains?) safe|(is|are|was) effective|reduced?s? (the )?(risk|"
                      r"mortality|progression)|improved?s?|beneficial|can be (used|continued)|may be (used|continued)|"
                      r"significant(ly)? (benefit|reduc\w+|lower\w*))\b", re.I)
_SENT = re.compile(r"(?<=[.!?;])\s+")
_WORD = re.compile(r"[a-z][a-z0-9\-]{2,}")
_N = r"(\d+(?:\.\d+)?)"
_BELOW = re.compile(r"(?:below|under|less than|lower than|<|fewer than)\s*(?:an? )?(?:\w+ ){0,3}?" + _N, re.I)
_ABOVE = re.compile(r"(?:above|over|more than|greater than|at least|>=?|≥|down to)\s*(?:an? )?(?:\w+ ){0,3}?" + _N, re.I)
_ABOVE_POST = re.compile(_N + r"[^;,]{0,30}?\bor (?:higher|more|above|greater)\b", re.I)
_BETWEEN = re.compile(r"between\s*" + _N + r"[^.;]{0,20}?\s*and\s*" + _N + r"|" + _N + r"\s*(?:-|–|to)\s*" + _N, re.I)


def stated_range(sentence: str) -> Optional[tuple[float, float]]:
    """The numeric range a sentence applies to, if it states one.

    >>> stated_range("Stop metformin when the eGFR falls below 30 mL/min")
    (-inf, 30.0)
    >>> stated_range("Continue when the eGFR is 45 mL/min/1.73 m2 or higher")
    (45.0, inf)
    """
    m = _BETWEEN.search(sentence)
    if m:
        a, b = [float(x) for x in m.groups() if x is not None][:2]
        return (min(a, b), max(a, b))
    m = _BELOW.search(sentence)
    if m:
        return (float("-inf"), float(m.group(1)))
    m = _ABOVE_POST.search(sentence) or _ABOVE.search(sentence)
    if m:
        return (float(m.group(1)), float("inf"))
    return None


def ranges_overlap(a: Optional[tuple[float, float]], b: Optional[tuple[float, float]]) -> bool:
    if a is None or b is None:
        return True
    return max(a[0], b[0]) < min(a[1], b[1])
STOP = set("""the and for with that this from are was were has have had not but its their there these those into
than then also may might can could should would will shall must been being which who whom whose what when where
why how all any each per use used using patients patient people adults adult treatment therapy risk risks study
studies trial trials evidence recommended recommend recommendation contraindicated avoid avoided effective safe
unsafe ineffective benefit beneficial significant significantly reduce reduces reduced reduction increase increases
increased improve improves improved harmful indicated discontinue discontinued stopped withheld started continued
given offered first-line lower lowered mortality difference effect does did more less other""".split())


@dataclass
class Claim:
    polarity: int  # +1 or -1
    terms: frozenset[str]
    range: Optional[tuple[float, float]]
    sentence: str


def sentence_claims(text: str) -> list[Claim]:
    out = []
    for s in _SENT.split(text):
        neg = bool(NEGATIVE.search(s))
        pos = bool(POSITIVE.search(NEGATIVE.sub(" ", s)))
        if neg == pos:  # no polarity, or both (hedged) - no claim
            continue
        terms = frozenset(w for w in _WORD.findall(s.lower()) if w not in STOP)
        out.append(Claim(-1 if neg else 1, terms, stated_range(s), s.strip()))
    return out


def claims_conflict(a: Claim, b: Claim, min_shared: int = 2) -> Optional[str]:
    if a.polarity == b.polarity:
        return None
    shared = a.terms & b.terms
    if len(shared) < min_shared:
        return None
    if not ranges_overlap(a.range, b.range):
        return None  # different ranges (thresholds, doses): different situations
    return f"opposite claims about {', '.join(sorted(shared)[:5])}"


@dataclass
class Conflict:
    a: str  # passage ids
    b: str
    reason: str
    dropped: Optional[str]  # the passage id dropped, None when the levels tie

    def to_dict(self) -> dict:
        return asdict(self)


def resolve(pairs: list[tuple[str, str, str]], levels: dict[str, int]) -> list[Conflict]:
    """Decide which passage of each conflicting pair goes: the higher e (lower evidence)."""
    out, gone = [], set()
    for a, b, reason in pairs:
        if a in gone or b in gone:
            continue
        if levels[a] == levels[b]:
            out.append(Conflict(a, b, reason, None))
            continue
        loser = a if levels[a] > levels[b] else b
        gone.add(loser)
        out.append(Conflict(a, b, reason, loser))
    return out


class RuleConflicts:
    name = "rules"

    def pairs(self, passages: list[tuple[str, str]], docs: Optional[dict[str, str]] = None) -> list[tuple[str, str, str]]:
        claims = {pid: sentence_claims(text) for pid, text in passages}
        ids = [pid for pid, _ in passages]
        docs = docs or {}
        out = []
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                if docs.get(a) is not None and docs.get(a) == docs.get(b):
                    continue
                for ca in claims[a]:
                    reason = next((r for cb in claims[b] if (r := claims_conflict(ca, cb))), None)
                    if reason:
                        out.append((a, b, f"{reason}: \"{ca.sentence[:160]}\" vs "
                                          f"\"{next(cb.sentence for cb in claims[b] if claims_conflict(ca, cb))[:160]}\""))
                        break
        return out


class LLMConflicts:
    name = "llm"
    SCHEMA = {"type": "object", "additionalProperties": False, "required": ["contradict", "reason"],
              "properties": {"contradict": {"type": "boolean"}, "reason": {"type": "string", "maxLength": 300}}}

    def __init__(self, llm: LLM, max_pairs: int = 10):
        self.llm = llm
        self.max_pairs = max_pairs

    def pairs(self, passages: list[tuple[str, str]], docs: Optional[dict[str, str]] = None) -> list[tuple[str, str, str]]:
        from medr2.appraise.prompts import conflict_messages

        docs = docs or {}
        words = {pid: frozenset(w for w in _WORD.findall(t.lower()) if w not in STOP) for pid, t in passages}
        cands = []
        ids = [pid for pid, _ in passages]
        for i, a in enumerate(ids):
            for b in ids[i + 1:]:
                if docs.get(a) is not None and docs.get(a) == docs.get(b):
                    continue
                shared = len(words[a] & words[b])
                if shared >= 3:
                    cands.append((shared, a, b))
        cands.sort(reverse=True)
        text = dict(passages)
        out = []
        for _, a, b in cands[: self.max_pairs]:
            try:
                r = structured(self.llm, conflict_messages(text[a], text[b]), self.SCHEMA, max_tokens=120)
            except LLMError:
                continue
            if r["contradict"]:
                out.append((a, b, "LLM: " + r["reason"]))
        return out
