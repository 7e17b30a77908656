"""Structured extractor for guideline summaries in the NGC layout: the scope fields (condition,
target population, interventions, outcomes) and every recommendation of the "Major
Recommendations" field with its strength and evidence class.

It reads the document's heading tree (field names are the leaf headings) and the passages cut
from it, so every triple keeps the TextID of the passage it was read from:

* (intervention, considered_for, condition) from "Interventions and Practices Considered";
* (condition, in_population, population) and (condition, outcome_considered, outcome);
* (intervention, recommended_for | not_recommended_for, condition or population) for each
  recommendation statement, with ``strength`` and ``evidence_class`` attributes when the
  statement (or the line introducing its list) states them.

Example::

    >>> from medr2.kg.extract.structured import field_items, parse_grade, polarity_of
    >>> parse_grade("Offer thymectomy (Level B).")
    {'strength': 'B'}
    >>> parse_grade("Use X [A; Class I evidence].")
    {'strength': 'A', 'evidence_class': 'I'}
    >>> polarity_of("Do not offer antibiotics for acute bronchitis."), polarity_of("Consider metformin.")
    (-1, 1)
    >>> field_items("- Survival (taking into account perioperative \\n mortality) \\n- Remission", 10)
    ['Survival (taking into account perioperative mortality)', 'Remission']
"""

from __future__ import annotations

import re
from typing import Optional

from medr2.kg.entities import EntityLibrary, Match
from medr2.kg.extract.base import Candidate, sentences
from medr2.kg.relations import type_satisfies
from medr2.schema import Document, Passage, SourceType

FIELDS = {
    "condition": "Disease/Condition(s)",
    "population": "Target Population",
    "interventions": "Interventions and Practices Considered",
    "outcomes": "Major Outcomes Considered",
    "recommendations": "Major Recommendations",
}
_BULLET = re.compile(r"^\s*(?:[-•*·]|\d+[.)]|[a-z][.)])\s*")
_SKIP_LINE = re.compile(r"(?i)^(?:note|none|not stated|see |refer to|the following|definitions?:|this guideline|"
                        r"key question|kq\s*\d|the guideline does not|does not address|excluded|exclusion)")
# an item cut where a list continues on the next lines ("... including", "... with", ">= 250 mg/dL or")
_CUT_ITEM = re.compile(r"(?i)(?:\b(?:including|with|without|or|and|as measured by|such as|of|for|in|to|the)|[:,(])\s*$")
_STRENGTH = [
    re.compile(r"\(\s*(?:Level|Grade|Strength(?: of Recommendation)?|SOR|Recommendation(?: grade)?)\s*[:=]?\s*([A-D]|U|I{1,3}|IV|Strong|Weak|Moderate|Conditional)\b", re.I),
    re.compile(r"\[\s*([A-D])\s*[\];,]"),
    re.compile(r"\(\s*([A-D])\s*\)\s*\.?\s*$"),
    re.compile(r"\b(?:Level|Grade)\s+([A-D]|U)\b(?:\s+recommendation)?"),
    re.compile(r"\b(Strong|Weak|Conditional)\s+recommendation", re.I),
    re.compile(r"\bStrength of (?:recommendation|evidence)\s*[:=]?\s*([A-D]|Strong|Weak|Moderate)\b", re.I),
]
_EVIDENCE = [
    re.compile(r"\bClass\s+(I{1,3}V?|IV|[1-4][ab]?)\b(?:\s+evidence)?"),
    re.compile(r"\b(?:quality of evidence|evidence quality|level of evidence|LOE|evidence level)\s*[:=]?\s*"
               r"(high|moderate|low|very low|[1-4][a-c]?\+{0,2}|[A-C])\b", re.I),
    re.compile(r"\b(high|moderate|low|very low)[- ]quality evidence", re.I),
]
_NEG = re.compile(r"(?i)\b(?:should not|must not|do not|does not|not recommended|(?:recommend|advise)(?:s|d|ed)? against|"
                  r"(?:advise|instruct|tell|told|ask|encourage)(?:s|d|ed)? not to|"
                  r"can ?not (?:be )?(?:give|given|take|taken|use|used|prescribe|prescribed|recommend|recommended)|"
                  r"avoid(?:s|ed|ing)?|avoidance of|against the use|discourage|not be (?:used|offered|given|prescribed|routinely)|"
                  r"not routinely|not as|no role|not indicated|not effective|no benefit)\b")
_POS = re.compile(r"(?i)\b(?:should|recommend(?:s|ed)?|consider|is indicated|are indicated|must|advised|suggest(?:s|ed)?|"
                  r"offer|is effective|are effective|is appropriate|use\b|give\b|prescribe|start|"
                  r"can (?:safely )?(?:be )?(?:take|taken|use|used|give|given|offer|offered|consider|considered))\b")
_RELATIVE_NEG = re.compile(r"(?i)\b(?:who|which|that)\s+(?:do|does|did|have|has|had|are|is|were|was|can|could)\s+not\b|"
                          r"\b(?:who|which|that)\s+(?:cannot|can't|don't|doesn't|didn't)\b")
_UNCERTAIN = re.compile(r"(?i)\b(?:insufficient evidence|inconclusive|unproven|cannot be made|Level U)\b")
_INTERVENTION_TYPES = ("Intervention", "Substance")
_TARGET_TYPES = ("Condition", "Population")


def _of(m) -> Match:
    """A dictionary mention as a match, keeping its level (a mention heading a longer unknown
    phrase is a suggestion)."""
    return Match(m.entity_id, m.name, m.type, m.level, m.surface)


def parse_grade(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pat in _STRENGTH:
        m = pat.search(text)
        if m:
            out["strength"] = m.group(1)
            break
    for pat in _EVIDENCE:
        m = pat.search(text)
        if m:
            out["evidence_class"] = m.group(1)
            break
    return out


def polarity_of(statement: str) -> int:
    """-1 a recommendation against, 1 for, 0 neither (or uncertain). A negation inside a relative
    clause ("patients who do not respond") says who, not what to do, and is not read."""
    statement = _RELATIVE_NEG.sub(" ", statement)
    if _UNCERTAIN.search(statement):
        return 0
    if _NEG.search(statement):
        return -1
    return 1 if _POS.search(statement) else 0


def field_items(text: str, limit: int) -> list[str]:
    """One item per line; in a bulleted field a line without a bullet continues the item above
    (the summaries wrap long items)."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    bulleted = any(_BULLET.match(ln) for ln in lines)
    merged: list[str] = []
    for ln in lines:
        if bulleted and merged and not _BULLET.match(ln):
            merged[-1] = merged[-1].rstrip() + " " + ln.strip()
        else:
            merged.append(ln)
    items = []
    for line in merged:
        line = " ".join(_BULLET.sub("", line).split()).rstrip(".;,:")
        if 2 < len(line) <= 160 and not _SKIP_LINE.match(line) and not _CUT_ITEM.search(line) \
                and "/" not in line.split(" ")[-1]:
            items.append(line)
    return items[:limit]


class StructuredExtractor:
    name = "structured"
    # what it can produce: the scope fields' relations and the recommendations' (extractor agreement)
    relations = frozenset({"considered_for", "in_population", "outcome_considered", "recommended_for",
                           "not_recommended_for"})

    def __init__(self, library: EntityLibrary, max_interventions: int = 25, max_conditions: int = 5):
        self.library = library
        self.max_interventions = max_interventions
        self.max_conditions = max_conditions

    def applies(self, doc: Document) -> bool:
        if doc.source_type != SourceType.guideline:
            return False
        titles = {s.title for _, s in doc.walk()}
        return FIELDS["recommendations"] in titles or FIELDS["interventions"] in titles

    def _role(self, surface: str, role_type: str) -> Match:
        """Library match, unless its type contradicts the field's role (a population phrase that
        names a disease stays a population)."""
        m = self.library.match(surface, role_type, fuzzy=False)
        if m.level != "unmatched" and type_satisfies(m.type, (role_type,)) is False and role_type != "Intervention":
            return Match("term:" + surface.lower(), surface, role_type, "unmatched", surface)
        if m.level == "unmatched":
            return Match(m.entity_id, surface, role_type, "unmatched", surface)
        return m

    def extract(self, doc: Document, passages: list[Passage]) -> list[Candidate]:
        # Field texts come from the heading tree; each item is traced to the passage holding it
        # (short fields may share a passage with their neighbours after segmentation).
        fields: dict[str, str] = {}
        for _, sec in doc.walk():
            if sec.title in FIELDS.values() and sec.text and sec.title not in fields:
                fields[sec.title] = sec.text
        flat = [(" ".join(p.text.split()), p) for p in passages]

        def locate(snippet: str) -> Optional[Passage]:
            key = " ".join(snippet.split())[:120]
            for text, p in flat:
                if key in text:
                    return p
            return None

        def items(key: str, limit: int) -> list[tuple[str, Passage]]:
            got = []
            for item in field_items(fields.get(FIELDS[key], ""), limit):
                p = locate(item)
                if p is not None:
                    got.append((item, p))
            return got

        out: list[Candidate] = []
        conditions = [(self._role(s, "Condition"), p) for s, p in items("condition", self.max_conditions)]
        interventions = [(self._role(s, "Intervention"), p) for s, p in items("interventions", self.max_interventions)]
        populations = [(self._role(s, "Population"), p) for s, p in items("population", 3)]
        outcomes = [(self._role(s, "Outcome"), p) for s, p in items("outcomes", 10)]

        def emit(h: Match, rel: str, t: Match, p: Passage, attrs: dict) -> None:
            out.append(Candidate(h.surface or h.name, rel, t.surface or t.name, p.passage_id, doc.doc_id, self.name,
                                 h.type, t.type, h.entity_id, t.entity_id, h.level, t.level, attrs))

        for iv, p in interventions:
            for cond, _ in conditions:
                emit(iv, "considered_for", cond, p, {"field": FIELDS["interventions"]})
        if conditions:
            main = conditions[0][0]
            for pop, p in populations:
                emit(main, "in_population", pop, p, {"field": FIELDS["population"]})
            for oc, p in outcomes:
                emit(main, "outcome_considered", oc, p, {"field": FIELDS["outcomes"]})
        known_iv = [(m, m.surface.lower()) for m, _ in interventions if len(m.surface) >= 4]
        rec_text = fields.get(FIELDS["recommendations"], "")
        if rec_text:
            self._recommendations(rec_text, locate, known_iv, [c for c, _ in conditions], emit)
        return out

    def _recommendations(self, text: str, locate, known_iv, conditions, emit) -> None:
        lead_grade: dict[str, str] = {}
        lead_polarity = 0
        for line in text.splitlines():
            if line.rstrip().endswith(":"):  # a line introducing a list carries its grade to the items
                lead_grade = parse_grade(line)
                lead_polarity = polarity_of(line)
                continue
            is_item = bool(_BULLET.match(line))
            if not is_item:
                lead_grade, lead_polarity = {}, 0
            for _, _, st in sentences(line):
                if len(st) < 20:
                    continue
                p = locate(st)
                if p is None:
                    continue
                pol = polarity_of(st)
                if pol == 0 and is_item:
                    pol = lead_polarity
                if pol == 0:
                    continue
                grade = parse_grade(st) or dict(lead_grade)
                mentions = self.library.mentions(st)
                low = st.lower()
                # the guideline's own interventions first: a statement naming one is about it; other
                # drugs and procedures it mentions are often context (prior treatment, alternatives)
                ivs = [m for m, key in known_iv if key in low]
                if not ivs:
                    ivs = [_of(m) for m in mentions
                           if type_satisfies(m.type, _INTERVENTION_TYPES) and m.type not in ("Chemical", "Food")]
                targets = [_of(m) for m in mentions if type_satisfies(m.type, _TARGET_TYPES)]
                if not targets and conditions:
                    # the guideline's condition, inferred rather than named: a weaker link
                    c0 = conditions[0]
                    targets = [Match(c0.entity_id, c0.name, c0.type, "suggestion" if c0.level in ("exact", "synonym")
                                     else c0.level, c0.surface)]
                rel = "recommended_for" if pol > 0 else "not_recommended_for"
                attrs = {"field": FIELDS["recommendations"], "statement": st[:600], **grade}
                for iv in ivs[:3]:
                    for t in targets[:2]:
                        if iv.entity_id != t.entity_id:
                            emit(iv, rel, t, p, attrs)
