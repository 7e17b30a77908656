"""Deterministic extractor: dictionary NER over real terminologies, then relation cue patterns
between two mentions of one sentence, negation-aware, English and Chinese.

Between mentions A ... B the text is read with the other mentions replaced by ``ENT`` and
list coordination ("A, ENT and ENT are used to treat B") removed; a cue of
:mod:`medr2.kg.relations` gives the relation and its direction. A negation in that span or just
before A ("there is no evidence that A prevents B") gives the ``not_`` relation. A dose next to a
drug gives ``dose_of``.

Example::

    >>> from medr2.kg.entities import EntityLibrary
    >>> from medr2.kg.extract.rules import RuleExtractor
    >>> lib = EntityLibrary.from_entries([("drug:lisinopril", "lisinopril", "Drug", []),
    ...     ("drug:metformin", "metformin", "Drug", []), ("mesh:hypertension", "hypertension", "Disease", [])])
    >>> ex = RuleExtractor(lib)
    >>> [(c.head, c.relation, c.tail) for c in ex.sentence_triples("Hypertension is often treated with lisinopril.")]
    [('lisinopril', 'treats', 'Hypertension')]
    >>> [(c.head, c.relation, c.tail) for c in ex.sentence_triples("Metformin does not treat hypertension.")]
    [('Metformin', 'not_treats', 'hypertension')]
"""

from __future__ import annotations

import re
from typing import Optional

from medr2.kg.entities import EntityLibrary, Mention, norm
from medr2.kg.extract.base import Candidate, sentences
from medr2.kg.relations import (EN_CUES, NEGATION, NEGATION_PART_OF, ZH_CUES, ZH_LINK_AND, ZH_LINK_IS,
                                ZH_NEGATION, ZH_SUFFIX)
from medr2.schema import Document, Passage

_HAN = re.compile(r"[\u3400-\u9fff]")
_DOSE = re.compile(
    r"\b\d+(?:[.,]\d+)?(?:\s?(?:-|to)\s?\d+(?:[.,]\d+)?)?\s?(?:mg|g|mcg|µg|μg|ug|IU|units?|mL|ml|mmol|mEq)"
    r"(?:\s?/\s?(?:kg|m2|m²|day|d|dose|h|hour|week))*"
    r"(?:\s+(?:once|twice|three times|four times|every \d+ hours|per day|daily|a day|weekly|at bedtime)"
    r"(?:\s+(?:daily|a day|weekly|a week))?)?", re.IGNORECASE)
_LEAD_COORD = re.compile(r"^(?:\s*(?:,|;|\band/or\b|\band\b|\bor\b|\bas well as\b|\bplus\b)\s*(?:,\s*)?(?:\band\b|\bor\b)?\s*(?:an?\s+|the\s+)?ENT(?:\s*\([^)]{1,20}\))?)+\s*,?", re.IGNORECASE)
_TRAIL_COORD = re.compile(r"(?:ENT\s*(?:,|\band/or\b|\band\b|\bor\b)\s*)+$", re.IGNORECASE)
_DOSE_LINK = re.compile(r"^\s*(?:\(|,|:|at|at a dose of|in a dose of|dosed at|given at|administered at|of|daily|"
                        r"(?:starting|initial|usual|maximum|recommended)\s+dose\s+(?:is|of))?\s*$", re.IGNORECASE)


# Guideline imperatives: "Offer A to adults with B", "Consider A for people with B", "Do not start A in
# people with B". The verb sits just before A (at the start of the sentence or clause, after an
# optional recommendation number), the population phrase between A and B.
_IMPERATIVE = re.compile(
    r"(?:^|[.;:]\s*|\d+(?:\.\d+)*\s+)(?P<neg>do not|don't|never|avoid|stop)?\s*(?P<verb>offer|consider|start|use|give|"
    r"prescribe|recommend|add|choose|continue|initiate|begin|administer)?\s*(?:adding\s+|using\s+|starting\s+|"
    r"treatment with\s+|therapy with\s+|an?\s+|the\s+)?$", re.IGNORECASE)
_TO_PEOPLE = re.compile(
    r"^\s*(?:\([^)]*\)\s*)?(?:,[^,;]{0,80},\s*)?(?:(?:\S+\s+){0,10}?)(?:to|for|in)\s+(?:all\s+|most\s+)?(?:\w+\s+){0,2}?"
    r"(?:adults|people|patients|persons|children|women|men|those|individuals|infants|adolescents)\s+"
    r"(?:\w+\s+){0,2}?(?:with|who have|having)\s+(?:(?:a|an|the|confirmed|established|known|suspected|"
    r"moderate|severe|mild|diabetes|\w+)\s+){0,3}?$", re.IGNORECASE)


# "For adults with B, offer A" / "In people with B, consider A": the population first.
_FOR_PEOPLE = re.compile(r"(?:^|[.;:]\s*|\d+(?:\.\d+)*\s+)(?:for|in)\s+(?:all\s+|most\s+)?(?:\w+\s+){0,2}?(?:adults|people|"
                         r"patients|persons|children|women|men|those|individuals)\s+(?:\w+\s+){0,2}?(?:with|who have|"
                         r"having)\s+(?:\w+\s+){0,3}?$", re.IGNORECASE)
_THEN_VERB = re.compile(r"^\s*(?:\([^)]*\)\s*)?(?:(?:and|or)\s+[^,]{0,40})?,\s*(?:(?:then|first|also)\s+)?(?P<neg>do not\s+|"
                        r"don't\s+|avoid\s+)?(?:offer|start with|start|consider|use|give|prescribe|recommend|add|"
                        r"consider adding|choose)?\s*(?:an?\s+|the\s+)?$", re.IGNORECASE)
# A heading that announces harms: "A: B, C" under it reads A causes B, C.
_HARMS_HEADING = re.compile(r"(?i)adverse|side[- ]effects?|harms?|complications|toxicity|undesirable")


class RuleExtractor:
    name = "rules"
    # what it can produce: the cue relations (English and Chinese) and their negations, doses, harms
    # under a harms heading, and guideline imperatives (extractor agreement)
    relations = frozenset({c.relation for c in EN_CUES} | {c[0] for c in ZH_CUES}
                          | {"not_" + c.relation for c in EN_CUES} | {"not_" + c[0] for c in ZH_CUES}
                          | {"dose_of", "causes", "recommended_for", "not_recommended_for"})

    def __init__(self, library: EntityLibrary, max_gap_words: int = 24):
        self.library = library
        self.max_gap_words = max_gap_words

    def applies(self, doc: Document) -> bool:
        return True

    def extract(self, doc: Document, passages: list[Passage]) -> list[Candidate]:
        out: list[Candidate] = []
        for p in passages:
            harms = any(_HARMS_HEADING.search(h) for h in p.heading_path)
            for c in self.passage_triples(p.text, harms):
                c.text_id, c.doc_id = p.passage_id, p.doc_id
                out.append(c)
        return out

    def passage_triples(self, text: str, harms: bool = False) -> list[Candidate]:
        out: list[Candidate] = []
        for _, _, sent in sentences(text):
            out.extend(self.sentence_triples(sent, harms=harms))
        return out

    def _mentions(self, sent: str) -> list[Mention]:
        ms = self.library.mentions(sent)
        if not _HAN.search(sent):
            taken = [(m.start, m.end) for m in ms]
            for d in _DOSE.finditer(sent):
                if not any(a < d.end() and d.start() < b for a, b in taken):
                    ms.append(Mention(d.start(), d.end(), d.group(0), "dose:" + norm(d.group(0)), d.group(0), "Dose",
                                      "exact"))
            ms.sort(key=lambda m: m.start)
        return ms

    def sentence_triples(self, sent: str, text_id: str = "", doc_id: str = "", harms: bool = False) -> list[Candidate]:
        ms = self._mentions(sent)
        if len(ms) < 2:
            return []
        zh = bool(_HAN.search(sent))
        seen: set[tuple[str, str, str]] = set()
        out: list[Candidate] = []
        for i in range(len(ms)):
            for j in range(i + 1, len(ms)):
                a, b = ms[i], ms[j]
                if a.entity_id == b.entity_id:
                    continue
                raw = sent[a.end:b.start]
                if not zh and len(raw.split()) > self.max_gap_words:
                    break
                if zh and len(raw) > 20:
                    break
                found = self._zh_relation(sent, a, b, ms) if zh else self._en_relation(sent, a, b, ms, i, j)
                if not found and harms and i == 0 and not zh and a.type in ("Drug", "Chemical", "Procedure") \
                        and re.match(r"^\s*:\s*(?:(?:[^,;.]{0,40}),\s*(?:and\s+)?(?:rarely,?\s+)?)*$", sent[a.end:b.start]):
                    found = ("causes", "fwd", ":")
                if not found:
                    continue
                rel, direction, cue_text = found
                head, tail = (a, b) if direction == "fwd" else (b, a)
                key = (head.entity_id, rel, tail.entity_id)
                if key in seen:
                    continue
                seen.add(key)
                out.append(Candidate(
                    head=head.surface, relation=rel, tail=tail.surface, text_id=text_id, doc_id=doc_id,
                    extractor=self.name, head_type=head.type, tail_type=tail.type, head_id=head.entity_id,
                    tail_id=tail.entity_id, head_level=head.level, tail_level=tail.level,
                    attrs={"sentence": sent[:600], "cue": cue_text.strip()[:80]}))
        return out

    # -- English ---------------------------------------------------------------------------------
    def _en_relation(self, sent: str, a: Mention, b: Mention, ms: list[Mention], i: int, j: int
                     ) -> Optional[tuple[str, str, str]]:
        if "Dose" in (a.type, b.type):
            other = b if a.type == "Dose" else a
            link = sent[a.end:b.start]
            if other.type in ("Drug", "Chemical") and (
                    _DOSE_LINK.match(link) if b.type == "Dose" else re.match(r"^\s*(?:of)?\s*$", link)):
                return "dose_of", ("fwd" if a.type == "Dose" else "rev"), link
            return None
        between = sent[a.end:b.start]
        for m in ms[i + 1:j]:
            between = between.replace(m.surface, "ENT", 1)
        if ";" in between or ":" in between:
            return None
        clean = _TRAIL_COORD.sub("", _LEAD_COORD.sub("", between)).strip()
        if _FOR_PEOPLE.search(sent[:a.start]) and b.type and a.type:
            m = _THEN_VERB.match(sent[a.end:b.start])
            if m and re.search(r"(?i)offer|start|consider|use|give|prescribe|recommend|add|choose|avoid|do not",
                               sent[a.end:b.start]):
                return ("not_recommended_for" if m.group("neg") else "recommended_for"), "rev", sent[a.end:b.start]
        imp = _IMPERATIVE.search(sent[:a.start])
        if imp and (imp.group("verb") or imp.group("neg")) and _TO_PEOPLE.match(" " + clean + " "):
            negative = bool(imp.group("neg"))
            return ("not_recommended_for" if negative else "recommended_for"), "fwd", imp.group(0) + " ... " + clean
        for cue in EN_CUES:
            if cue.pattern.match(clean + " "):
                rel = cue.relation
                neg = NEGATION.search(clean)
                if neg is None:
                    before = sent[max(0, a.start - 60):a.start]
                    before = re.split(r"[,;:()]", before)[-1]
                    neg = NEGATION.search(" ".join(before.split()[-6:]))
                if neg and not (rel in NEGATION_PART_OF and re.search(r"\b(?:should|must)\s+(?:not|never)\b", clean)):
                    rel = "not_" + rel
                return rel, cue.direction, clean
        # the negated forms the cues do not spell: "A does not treat B", "A did not reduce the risk of B"
        if NEGATION.search(clean):
            stripped = NEGATION.sub(" ", clean)
            stripped = re.sub(r"\b(?:does|do|did|is|are|was|were)\b", " ", stripped)
            stripped = " ".join(stripped.split())
            stripped = re.sub(r"\b(treat|cause|prevent|reduce|improve|increase|relieve|lead)\b",
                              lambda m: m.group(1) + "s", stripped)
            for cue in EN_CUES:
                if cue.pattern.match(stripped + " "):
                    return "not_" + cue.relation, cue.direction, clean
        return None

    # -- Chinese ---------------------------------------------------------------------------------
    def _zh_relation(self, sent: str, a: Mention, b: Mention, ms: list[Mention]) -> Optional[tuple[str, str, str]]:
        between = sent[a.end:b.start]
        for m in ms:  # list coordination: "表现为头痛、头晕" reads the same for both symptoms
            if a.end <= m.start and m.end <= b.start:
                between = between.replace(m.surface, "、", 1)
        between = re.sub(r"^[、，,和及与\s]+|[、，,和及与\s]+$", "", between)
        after = sent[b.end:b.end + 8]
        neg = bool(ZH_NEGATION.search(between))
        core = ZH_NEGATION.sub("", between)
        if ZH_LINK_IS.match(core):
            for rel in ("risk_factor_for", "symptom_of"):
                if ZH_SUFFIX[rel].match(after):
                    return ("not_" + rel if neg else rel), "fwd", between
        if ZH_LINK_AND.match(core) and ZH_SUFFIX["interacts_with"].match(after):
            return ("not_interacts_with" if neg else "interacts_with"), "fwd", between
        for rel, direction, pat in ZH_CUES:
            if pat.match(core):
                return ("not_" + rel if neg and rel != "contraindicated_in" else rel), direction, between
        return None
