"""Guideline recommendations as evidence units (issue 36): the graded statements a passage holds,
each with its grade as written, a normalised strength, its direction and the population it is
for. Pure functions over text; nothing is stored at ingest, so any index gets them.

A statement is a *recommendation* when it directs care ("should", "is recommended", "may be
considered", "avoid", "do not") or carries a grade tag; a finding on the evidence ("there is
Level I evidence for ...", "data are insufficient") counts too, since a clinician wants to know
what the guideline could not recommend. The sentences that follow it in the same bullet and do
not start a statement of their own are its qualifiers and stay with it ("These agents should
only be considered when ..."). Labels such as "Recommendation." or "R3:" are dropped.

Grades and their strengths are read by :mod:`medr2.appraise.grades`.

Example::

    >>> from medr2.appraise.recommendations import extract, parse_grade
    >>> parse_grade("Offer statins (Strong recommendation, moderate-quality evidence).")
    ('Strong recommendation, moderate-quality evidence', 'strong')
    >>> [(r.statement, r.grade, r.strength, r.direction) for r in extract(
    ...     "- Recommendation. Quinine should be avoided for routine cramps (Level A). "
    ...     "It should only be used when cramps are disabling.")]
    [('Quinine should be avoided for routine cramps (Level A). It should only be used when cramps are disabling.', 'Level A', 'strong', 'against')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional, Sequence

from medr2.appraise.grades import STRENGTH_RANK, STRENGTHS, parse_grade  # noqa: F401 (re-exported)
from medr2.appraise.headings import SECTION_NUMBER, heading_lines, section_heading  # noqa: F401 (re-exported)
from medr2.appraise.wording import (BULLET, FIRM, GRADE_ONLY, IMPERATIVE, INSUFFICIENT, LABEL, STARTS_OWN,
                                    advises_against, advises_for, directs, grade_heading, grade_tag, imperative,  # noqa: F401
                                    is_recommendation, pointer, reported, trailing_grade)
from medr2.kg.extract.structured import polarity_of
from medr2.util.sentences import sentences

# a description of practice, not advice: "X is often recommended", "surveys estimate", "is widely used"
_DESCRIPTIVE = re.compile(r"(?i)\b(?:is|are|was|were|has been|have been)\s+(?:often|commonly|frequently|widely|"
                          r"sometimes|usually|traditionally|generally|increasingly)\s+(?:recommended|used|prescribed|"
                          r"advised|offered|given)\b")
_POPULATION = re.compile(
    r"(?i)^(?:(?:in|for|among)\s+)((?:all\s+|most\s+)?(?:adults?|patients?|people|persons?|women|men|girls|boys|"
    r"child(?:ren)?|infants?|neonates?|newborns?|adolescents?|individuals?|those|pregnant|older|elderly|"
    r"postmenopausal|premenopausal|healthy|asymptomatic|symptomatic|high[- ]risk|low[- ]risk|average[- ]risk|"
    r"hospitali[sz]ed|critically|outpatients?|inpatients?|residents?|athletes?|survivors?|smokers?|"
    r"nonpregnant|non-pregnant|term|preterm)\b[^,;:]{0,160}),")
_SUBJECT = re.compile(
    r"(?i)^((?:all\s+|most\s+)?(?:adults?|patients?|people|persons?|women|men|child(?:ren)?|infants?|neonates?|"
    r"adolescents?|individuals?|pregnant\s+women|older\s+adults|smokers)\b[^,;:]{0,160}?)\s+"
    r"(?:should|must|may|can|are|who\s+\w+\s+should)\b")


# sections of a guideline that describe it rather than recommend: methods, grading schemes, scope,
# evidence tables, benefits and harms, implementation and publication details (NGC field names
# and the usual headings of guideline documents)
_NOT_ADVICE_SECTION = re.compile(
    r"(?i)\b(?:method|rating scheme|grading|definitions?|scope|objective|intended users|target population|"
    r"outcomes considered|interventions and practices considered|specialty|guideline category|"
    r"evidence supporting|references?|bibliograph|implementation|identifying information|availability|"
    r"disclaimer|copyright|funding|conflicts? of interest|financial disclosure|committee|endorser|developer|"
    r"guideline title|validation|cost analysis|potential (?:benefits|harms)|benefits/harms|background|"
    r"introduction|acknowledg|abbreviation|glossary|patient resources|companion documents|status|"
    r"date released|adaptation|composition of group)")
# a grade definition ("Level A = Established as effective", "Grade B: fair evidence") or a
# grading-scheme sentence, not a recommendation
_DEFINITION = re.compile(
    r"(?i)^\s*(?:\(?\s*(?:Level|Grade|Class|Strength|Quality|Category|Evidence)\b[^.=:]{0,40}?(?:=|\brequires\b|"
    r"(?::|\s-\s)\s*(?:established|probably|possibly|data|evidence|good|fair|poor|insufficient|at least|one or more|"
    r"consistent|limited|expert|based on|high|moderate|low|very low|the (?:benefits?|net benefit)))|"
    r"[A-D]\s*=\s|[IV]{1,3}(?:-\d)?\s*=\s)|"
    r"\bthere is (?:good|fair|poor|insufficient) evidence to recommend (?:for |against )?the clinical preventive action")
_TRAILER = re.compile(r"(?i)\s(?:Definitions|Abbreviations|Key|Legend)\s*:.*$", re.S)


def advice_section(heading_path: list[str]) -> bool:
    """Whether a passage's section may hold recommendations (not methods, grading schemes,
    scope, harms, publication details).

    >>> advice_section(["Recommendations", "Major Recommendations"]), advice_section(["Methodology", "Rating Scheme"])
    (True, False)
    """
    return not any(_NOT_ADVICE_SECTION.search(h) for h in heading_path)


@dataclass
class Statement:
    """One recommendation as written in a passage."""

    statement: str
    grade: Optional[str]  # the grade as written ("Level A", "1|++OO"); None: ungraded
    strength: Optional[str]  # one of STRENGTHS; None: ungraded
    direction: str  # "for", "against" or "neutral" (a finding, an option, insufficient evidence)
    population: Optional[str]
    firm: bool  # firm wording ("should", "is recommended") rather than conditional ("may")
    # the heading it sits under: in its passage (extract), else before it in its document (section_heading)
    section: Optional[str] = None
    # a list's lead-in whose items segmentation put in the next passages: those passages (TextIDs)
    continued_in: list[str] = field(default_factory=list)
    # a list ("... if the person has: a murmur; ..."): its lead-in as written and its items; open
    # when the items run to the end of the passage (the list may go on in the next one)
    lead_in: Optional[str] = None
    items: list[str] = field(default_factory=list)
    open_list: bool = False

    @property
    def rank(self) -> float:
        """Order key of a recommendation list (higher first): its strength, or for an ungraded
        statement its wording (firm 2.75, conditional 1.5)."""
        if self.strength is not None:
            return STRENGTH_RANK[self.strength]
        return 2.75 if self.firm else 1.5


def population_of(statement: str) -> Optional[str]:
    """Who a recommendation is for, when its wording says so ("In adults with X, ..."; "Women
    who ... should ...").

    >>> population_of("In adults with type 2 diabetes, metformin should be offered first.")
    'adults with type 2 diabetes'
    >>> population_of("Patients with ascites should receive antibiotics.")
    'Patients with ascites'
    """
    s = LABEL.sub("", statement).strip()
    m = _POPULATION.match(s) or _SUBJECT.match(s)
    return " ".join(m.group(1).split()) if m else None


def _units(text: str) -> list[tuple[Optional[str], str]]:
    """The bullets of a passage (a line that starts without a bullet continues the one above
    when the passage is bulleted), each a run of sentences, with the section heading in force
    in the passage (None before its first). A heading line (:func:`heading_lines`) is no part of
    a statement: it ends the unit above it, and the units after it sit under it."""
    lines = [ln for ln in text.splitlines() if ln.strip()]
    heads = heading_lines(lines)
    bulleted = any(BULLET.match(ln) for i, ln in enumerate(lines) if i not in heads)
    out: list[tuple[Optional[str], str]] = []
    section, fresh = None, True
    for i, ln in enumerate(lines):
        if i in heads:
            section, fresh = SECTION_NUMBER.sub("", ln.strip()), True
            continue
        if grade_heading(ln):  # "Level 2" heads the lines below it
            out.append((section, ln.strip()))
        elif out and not fresh and ((GRADE_ONLY.match(ln) and grade_tag(ln)) or (
                bulleted and not BULLET.match(ln) and not STARTS_OWN.match(ln.strip()) and not opens_unit(ln))):
            # a wrapped line of a bullet, or the grade of the line above: "[Level A]" on a line of its own
            out[-1] = (out[-1][0], out[-1][1].rstrip() + " " + ln.strip())
        else:
            out.append((section, ln.strip()))
        fresh = False
    return out


def extract(text: str, max_follow: int = 2) -> list[Statement]:
    """The recommendations of a passage, in their order. A recommendation sentence starts a
    statement; up to ``max_follow`` following sentences of the same bullet that are not
    recommendations of their own, nor labelled parts ("Conclusion.", "Rationale:"), qualify it.
    A following sentence that directs care itself ("They should only be used after ...") also
    stays with it when it starts with a pronoun that refers back."""
    out: list[Statement] = []
    lead: Optional[_List] = None  # the list a lead-in opened, while its items come
    header: tuple[Optional[str], Optional[str]] = (None, None)  # the grade of the header in force
    header_section: Optional[str] = None

    def graded(stmts: list[Statement]) -> list[Statement]:
        return [_inherit(x, header) for x in stmts]

    for section, raw in _units(text):
        unit = _unit_text(raw)
        if lead is not None:
            if section == lead.section and lead.takes(raw, unit):
                continue
            out[lead.at:lead.at + 1] = graded(lead.statements(open_list=False))
            lead = None
        if section != header_section:  # a header's grade holds under its own heading only
            header, header_section = (None, None), section
        if not unit or STARTS_OWN.match(unit):
            continue
        if grade_tag(unit):
            # a grade heading ("Level 2"), or a bracketed grade under a section heading, grades the units below;
            # a bare grade line of a paragraph ("Strong recommendation" in a grading table) is no statement
            if grade_heading(unit) or GRADE_ONLY.match(unit):
                header = parse_grade(unit)
            continue
        current: list[str] = []
        loose: list[str] = []  # the unit's sentences since the last statement that none took
        follow = 0
        for _, _, s in sentences(unit):
            if is_header(s):  # "The following recommendations are based on ... (Level A):"
                if current:
                    out.append(_inherit(_statement(" ".join(current), section), header))
                current, header, loose = [], parse_grade(s), []
                continue
            refers_back = bool(re.match(r"(?i)^(?:these|this|they|it|such|both|either|the latter|however|"
                                        r"in (?:these|such) (?:cases|patients))\b", s))
            tag = grade_tag(s)
            if current and (tag or GRADE_ONLY.match(s)):  # "... the risk. (Strong recommendation; level B)"
                current.append(s)
                continue
            if tag:  # a grade after sentences without advice wording grades them: "... moisturizers. [Level A]"
                if loose:
                    current, follow, loose = loose[-(max_follow + 1):] + [s], max_follow, []
                continue
            if is_recommendation(s) and not (current and refers_back and follow < max_follow):
                if current:
                    out.append(_inherit(_statement(" ".join(current), section), header))
                current, follow, loose = [s], 0, []
            elif current and follow < max_follow:
                current.append(s)
                follow += 1
            elif not current:
                loose.append(s)
        if current:
            out.append(_inherit(_statement(" ".join(current), section), header))
            if is_lead_in(current[-1]):
                lead = _List(len(out) - 1, out[-1].statement, section)
    if lead is not None:  # the passage ends inside the list
        out[lead.at:lead.at + 1] = graded(lead.statements(open_list=True))
    return [s for s in out if _is_advice(s.statement)]


MAX_LIST_ITEMS = 12  # items a list of conditions quotes at most (more: the quote ends "; ...")
# a colon line that heads recommendations or findings ("The following recommendations are based on
# good evidence (Level A):") is a header whose grade its items inherit (header_grade), not a list
_HEADER_WORDS = re.compile(r"(?i)\b(?:recommendations?|conclusions?|statements?|based on)\b")
_HEADS = re.compile(r"(?i)\b(?:recommendations?|conclusions?|statements?)\b|\bthe following\b.*\bbased on\b")


def is_header(sentence: str) -> bool:
    """A line that heads recommendations ("The following recommendations are based on good and
    consistent evidence (Level A):"): no statement of its own; the statements after it under the
    same heading take its grade when they carry none (:func:`extract`; across passages,
    :func:`header_grade`).

    >>> is_header("The following recommendation is based on limited evidence (Level B):")
    True
    >>> is_header("Consider echocardiography if the person has:"), is_header("Treatment should be based on severity:")
    (False, False)
    """
    if not sentence.rstrip().endswith(":"):
        return False
    # "based on" alone heads a list only with a grade or "the following" ("Treatment should be
    # based on severity:" introduces its own list)
    return bool(_HEADS.search(sentence)) or (bool(_HEADER_WORDS.search(sentence)) and parse_grade(sentence)[0] is not None)


def _inherit(statement: Statement, header: tuple[Optional[str], Optional[str]]) -> Statement:
    """A statement with no grade of its own takes the grade of the header it sits under."""
    if statement.grade is None and header[0] is not None:
        statement.grade, statement.strength = header
        if statement.strength == "insufficient":
            statement.direction = "neutral"
    return statement


def is_lead_in(statement: str) -> bool:
    """A recommendation that introduces a list ("Consider echocardiography if the person has:",
    "If imaging shows an abscess (I-C):"), not a header of recommendations."""
    return statement.rstrip().endswith(":") and not _HEADER_WORDS.search(statement)


def opens_unit(line: str) -> bool:
    """A capitalised line that starts a recommendation of its own ("Do not offer nitrates.",
    "Patients should be referred.") or opens a list ("If imaging shows an abscess (I-C):"): after
    a bullet it is not the bullet's hard-wrapped continuation."""
    s = line.strip()
    return bool(s) and s[0].isupper() and (directs(s) or s.endswith(":"))


def list_item(raw: str, unit: str, items: list[str], bullet_only: bool = False) -> bool:
    """Whether a unit goes on the list a lead-in opened, after ``items``: a bullet (or, unless
    ``bullet_only``, a short line that does not end a sentence) that opens no list of its own, of
    the list's kind: the first item decides whether the items are actions ("If stable: - Consider
    other diagnoses.") or conditions ("if the person has: - a heart murmur"), and a unit of the
    other kind (a recommendation after the list) ends it."""
    if not unit or unit.endswith(":") or STARTS_OWN.match(unit):
        return False
    if not BULLET.match(raw) and (bullet_only or len(unit.split()) > 25 or unit[-1] in ".!?"):
        return False
    return not items or directs(unit) == directs(items[0])


@dataclass
class _List:
    """A lead-in's list while :func:`extract` reads it: where the lead-in stands in the output,
    its text, its section, the items so far, and whether items were left out (``cut``)."""

    at: int
    lead_in: str
    section: Optional[str]
    items: list[str] = field(default_factory=list)
    cut: bool = False

    def takes(self, raw: str, unit: str) -> bool:
        """Take the unit when it is an item (:func:`list_item`); a list of conditions quotes at most
        MAX_LIST_ITEMS, and marks the ones after as left out."""
        if not list_item(raw, unit, self.items):
            return False
        if len(self.items) >= MAX_LIST_ITEMS and not directs(self.items[0]):
            self.cut = True
        else:
            self.items.append(unit)
        return True

    def statements(self, open_list: bool) -> list[Statement]:
        """Actions are recommendations each (under the lead-in, "If stable (II-D): Consider other
        diagnoses.", each with its own grade and direction); conditions make one statement with the
        lead-in, open when the passage ended inside it (the list may go on in the next passage)."""
        if self.items and directs(self.items[0]):
            return [under(self.lead_in, item, self.section) for item in self.items]
        return [as_list(self.lead_in, self.items, self.section, open_list=open_list and not self.cut, cut=self.cut)]


def under(lead_in: str, action: str, section: Optional[str]) -> Statement:
    """One action of a lead-in's list, read under the lead-in: its own grade, else the lead-in's;
    its own direction and wording.

    >>> s = under("If imaging shows an abscess (I-C):", "Do not delay antibiotics.", None)
    >>> s.statement, s.grade, s.direction
    ('If imaging shows an abscess (I-C): Do not delay antibiotics.', 'I-C', 'against')
    """
    s = _statement(f"{lead_in.rstrip()} {action}", section)
    own = _statement(action, section)
    if own.grade is not None:
        s.grade, s.strength = own.grade, own.strength
    s.direction = "neutral" if s.strength == "insufficient" else own.direction
    s.firm = own.firm
    return s


def lead_items(texts: Sequence[str], before: Sequence[str] = ()) -> tuple[list[str], int, bool]:
    """The conditions a list goes on with in the passages after its own (segmentation may cut a
    lead-in from its list, cut a list, or put each item in a passage of its own): the leading
    bullets that direct nothing (:func:`list_item`; ``before``: the items its own passage held),
    before any heading, other line or lead-in, read on into the next text while a whole text is
    items. Returns the new items, how many texts held them, and whether items were left out
    (MAX_LIST_ITEMS in all). (A list of actions is not read on: each action in the next passage
    is a recommendation of its own there.)

    >>> lead_items(["- a heart murmur", "- signs of heart failure\\nOffer aspirin.", "- chest pain"])
    (['a heart murmur', 'signs of heart failure'], 2, False)
    """
    out: list[str] = []
    used, cut = 0, False
    for text in texts:
        whole, n = True, len(out)
        for section, raw in _units(text):
            unit = _unit_text(raw)
            if section is not None or directs(unit) or not list_item(raw, unit, [*before, *out], bullet_only=True):
                whole = False
                break
            if len(before) + len(out) >= MAX_LIST_ITEMS:
                whole, cut = False, True
                break
            out.append(unit)
        used += len(out) > n
        if not whole or len(out) == n:
            break
    return out, used, cut


def as_list(lead_in: str, items: list[str], section: Optional[str], open_list: bool = False,
            cut: bool = False) -> Statement:
    """The statement of a lead-in and its conditions, read as one (an item may carry the list's
    grade), with the lead-in's direction."""
    s = _statement(with_items(lead_in, items, cut), section)
    s.direction = "neutral" if s.strength == "insufficient" else _statement(lead_in).direction
    s.lead_in, s.items, s.open_list = lead_in, list(items), open_list
    return s


def continued(statement: Statement, items: list[str], passage_ids: list[str], cut: bool = False) -> Statement:
    """A list that goes on in the next passages, with their items and the passages they come from
    (``cut``: more items follow there)."""
    out = as_list(statement.lead_in or statement.statement, statement.items + items, statement.section, cut=cut)
    out.continued_in = list(passage_ids)
    return out


def with_items(lead_in: str, items: list[str], cut: bool = False) -> str:
    """A lead-in with its list's items, one clause each ("... has: a murmur; signs of heart failure.");
    ``cut``: more items follow in the guideline ("; ...").

    >>> with_items("Use these scores:", ["Blatchford score at first assessment, and", "Full Rockall score"])
    'Use these scores: Blatchford score at first assessment; Full Rockall score.'
    """
    clean = [re.sub(r"(?i)(?:[,;.]\s*(?:and|or)?|\s+(?:and|or))\s*$", "", " ".join(x.split())) for x in items]
    clean = [x for x in clean if x]
    return f"{lead_in.rstrip()} {'; '.join(clean)}{'; ...' if cut else '.'}" if clean else lead_in


def _is_advice(statement: str) -> bool:
    """Not a grade definition, a bare parenthetical, a fragment of under four words, a pointer to
    another part of the document, nor (graded statements excepted) a description of practice ("X is
    often recommended") or reported speech (a committee's discussion, another guideline cited, a
    recommendation for research, a question)."""
    return not (_DEFINITION.search(statement) or statement.startswith("(") or len(statement.split()) < 4
                or pointer(statement)
                or ((_DESCRIPTIVE.search(statement) or reported(statement)) and parse_grade(statement)[0] is None))


_HEADER_END = re.compile(r":\s*$")


def header_grade(previous: list[str]) -> tuple[Optional[str], Optional[str]]:
    """The grade a list inherits from its header: ``previous`` are the texts before a
    recommendation in its document, nearest last. The nearest line that is not a bullet and ends
    with a colon ("The following recommendations are based on limited evidence (Level B):") or is
    a bare grade ("Level 2") is the header; its grade, or (None, None) when it has none or no
    header is found.

    >>> header_grade(["Level A applies below (Level A):", "- Offer X.", "- Avoid Y."])
    ('Level A', 'strong')
    >>> header_grade(["Background:", "- Offer X."])
    (None, None)
    """
    for text in reversed(previous):
        for line in reversed([ln.strip() for ln in text.splitlines() if ln.strip()]):
            if (_HEADER_END.search(line) or grade_heading(line)) and not BULLET.match(line):
                return parse_grade(line)
    return None, None


def _unit_text(raw: str) -> str:
    """A unit's text without its label, bullet or trailing glossary; a table row's leading grade
    moved behind its statement (:func:`trailing_grade`)."""
    return trailing_grade(_TRAILER.sub("", LABEL.sub("", raw)).strip())


def _statement(text: str, section: Optional[str] = None) -> Statement:
    grade, strength = parse_grade(text)
    if strength is None and INSUFFICIENT.search(text):
        strength = "insufficient"
    pol = polarity_of(text)
    if advises_against(text) or (grade or "").startswith("COR 3"):
        pol = -1  # "is not suitable for ...", "(Strength of Recommendation: Weak Against)", ACC/AHA's no benefit or harm
    elif pol == 0 and advises_for(text):
        pol = 1
    direction = "neutral" if strength == "insufficient" else {1: "for", -1: "against"}.get(pol, "neutral")
    return Statement(text, grade, strength, direction, population_of(text), bool(FIRM.search(text)), section)
