"""The wording of a guideline recommendation (issue 36): what directs care ("should", "is
recommended", "Offer ..."), firm or conditional wording, labels and bullets. Pure regular
expressions and predicates shared by :mod:`medr2.appraise.recommendations` and
:mod:`medr2.appraise.headings`.

    >>> from medr2.appraise.wording import directs, is_recommendation
    >>> directs("Offer aspirin to adults with angina."), directs("a heart murmur")
    (True, False)
    >>> is_recommendation("Thymectomy is an option (Class II).")
    True
"""

from __future__ import annotations

import re

from medr2.appraise.grades import parse_grade
from medr2.util.sentences import sentences

# the words after "may be" that make it advice ("may be considered", "may be reduced to 5 mg"); other
# "may be ..." describe ("may be associated with", "may be the most important asset", "may be mild")
_ADVICE_AFTER_MAY_BE = (
    r"(?:an?\s+|\w+ly\s+)?(?:considered|used|offered|given|appropriate|reasonable|beneficial|helpful|useful|"
    r"option|alternative|indicated|preferred|preferable|effective|ineffective|recommended|warranted|administered|"
    r"prescribed|started|initiated|continued|discontinued|stopped|withheld|performed|tried|added|omitted|avoided|"
    r"delayed|deferred|repeated|acceptable|safe|unsafe|suitable|necessary|required|needed|harmful|ingested|taken|"
    r"applied|measured|monitored|checked|obtained|tested|screened|referred|treated|managed|reduced|increased|"
    r"decreased|adjusted|titrated|transferred|switched|combined|discharged|undertaken|candidates?|restarted|resumed|"
    r"extended|shortened|withdrawn|delivered|done|carried out|advisable|of (?:benefit|value|use))\b")
DIRECTIVE = re.compile(
    r"(?i)\b(?:should|must|shall|recommend(?:s|ed)?|suggest(?:s|ed)?|advise[sd]?|"
    r"(?:is|are)\s+(?:not\s+)?(?:indicated|contraindicated|preferred|advised|warranted|required|necessary)|"
    r"consider(?:ed)?|offer(?:ed)?|avoid(?:ed)?|do not|"
    r"(?:is|are)\s+(?:also\s+|not\s+|generally\s+|usually\s+)?(?:an?\s+)?(?:reasonable|appropriate|acceptable|suitable)|"
    r"(?:is|are)\s+(?:an?\s+)?(?:option|first[- ]line|(?:the\s+)?(?:treatment|method|test|modality|drug|agent) of choice)|"
    r"(?:is|are)\s+(?:not\s+|strongly\s+)?encouraged|(?:makes?|made|is|there is)\s+no recommendation|"
    r"no recommendation (?:can|could) be made|no recommendation (?:for|is made)|"
    r"recommendations? (?:can ?not|could not) be made|cannot (?:make|provide|give) (?:a )?recommendation|"
    r"it is (?:\w+\s+)?(?:important|essential|advisable|vital|crucial) "
    r"(?:that|to (?!(?:note|remember|recogni[sz]e|emphasi[sz]e|understand|acknowledge|mention|point out|reali[sz]e|"
    r"stress|evaluate the)\b))|"
    r"(?:may|might)\s+(?:be\s+" + _ADVICE_AFTER_MAY_BE + r"|"
    r"benefit|use|receive|reduce)|can\s+be\s+(?:used|offered|considered|given|performed)|"
    r"there is (?:\w+\s+){0,3}evidence|(?:evidence|data) (?:is|are|was|were) (?:insufficient|inadequate|inconclusive)|"
    r"insufficient evidence)\b")
# wording of an ungraded statement: firm ("should", "is recommended") or conditional ("may")
# NICE-style imperatives that open a recommendation ("Offer ...", "Do not ...", "Stop ...")
IMPERATIVE = re.compile(
    r"^(?:offer|consider|do not|don't|stop|continue|start|measure|check|prefer|expect|advise|reduce|use|give|"
    r"avoid|refer|assess|screen|test|treat|monitor|prescribe|discuss|ensure|explain|arrange|review|repeat|"
    r"perform|obtain|administer|withhold|discontinue|recommend|encourage|think about|be aware|take into account|"
    r"inform|audit|base|ask|provide|involve|tell|record|document|seek|make sure|agree|support|keep|follow|manage|"
    r"counsel|instruct|educate|teach|reassure|warn|carry out|take|identify|suspect|diagnose|confirm|investigate|"
    r"calculate|titrate|increase|switch|add|aim for|aim to|maintain|intensify|recogni[sz]e|discourage|hold)\b(?!-)"
    # the word as a noun: "Support for this approach", "Base excess", "use of rescue medication", "Record numbers",
    # "Increase in mortality"
    r"(?!\s+(?:of|results?|numbers?|excess|analysis|linkage|was|were|is|are|has|have)\b)"
    r"(?!(?<=support)\s+for\b)(?!(?<=use)\s+for\b)(?!(?<=increase)\s+in\b)",
    re.I)
# a conditional clause before an imperative: "If HPV testing is performed, manage using ..."
LEADING_CONDITION = re.compile(r"(?i)^(?:if|when|where|once|after|before|unless|until|in|for)\b[^,;:]{1,150},\s*")
# wording that looks like a directive but reports: "these findings suggest", "was considered to be related"
REPORTED_WORDING = re.compile(
    r"(?i)\b(?:findings|results|data|evidence|stud(?:y|ies)|analys[ie]s|trials?|this|these|it)\s+(?:also\s+|may\s+|"
    r"might\s+)?suggest(?:s|ed)?\b|\b(?:has|have|had)\s+been\s+suggested\b|\b(?:was|were)\s+considered\b|"
    r"\b(?:committee|group|panel|ERG|authors?)\s+(?:also\s+)?considered\b")
# "to avoid" is a purpose ("in order to avoid toxicity"), read as "to prevent": only the words around it direct
TO_AVOID = re.compile(r"(?i)\bto avoid\b")
# "recommended" as an adjective ("NICE recommended treatments", "at its recommended dose",
# "Recommended antibiotics are available as generic formulations") directs nothing
ADJECTIVE_RECOMMENDED = re.compile(
    r"(?i)(?:(?<=\s)(?<!\bis\s)(?<!\bare\s)(?<!\bwas\s)(?<!\bwere\s)(?:the|its|their|his|her|a|an|other|NICE)|"
    r"^(?:its|their|other|NICE))\s+"
    r"recommended\s+(?!(?:that|for|to|as|in|by|if|when|only|against|with|and|or|but|because|at|on|first|initially|"
    r"instead)\b)(?=[a-z])|^Recommended\s+(?=[a-z])")
GRADE_ONLY = re.compile(r"^\s*[(\[][^()\[\]]{1,120}[)\]]\s*\.?\s*$")
FIRM = re.compile(r"(?i)\b(?:should|must|shall|recommend(?:s|ed)?|(?:is|are)\s+(?:not\s+)?indicated|"
                   r"contraindicated|do not|avoid)\b|^(?:offer|do not|stop|start|measure|check|give|use|treat|"
                   r"refer|avoid)\b")
INSUFFICIENT = re.compile(r"(?i)\b(?:insufficient|inadequate|inconclusive|unproven|no recommendation|"
                           r"cannot be made|Level U)\b")
LABEL = re.compile(r"(?i)^\s*(?:[-•*–]\s*)*(?:(?:key\s+)?recommendations?\s*(?:\d+(?:\.\d+)*)?\s*[.:)-]\s*|"
                    r"R\d+(?:\.\d+)*\s*[.:)-]\s*|\d+(?:\.\d+)*[.)]\s+|\d+(?:\.\d+)+:?\s+|[a-z][.)]\s+)?")
BULLET = re.compile(r"^\s*(?:[-•*–]|\d+(?:\.\d+)*[.)]|[a-z][.)])\s+")
STARTS_OWN = re.compile(r"(?i)^(?:conclusion|question|rationale|justification|evidence|remarks?|note|comment|"
                         r"summary|background|qualifying statement|implementation considerations?)s?\b\s*[.:]")


def directs(sentence: str) -> bool:
    """Whether a sentence directs care or reports a finding on the evidence (its wording).

    >>> directs("Monitor blood counts at its recommended dose."), directs("NICE recommended treatments exist.")
    (True, False)
    """
    plain = TO_AVOID.sub("to prevent", REPORTED_WORDING.sub(" ", ADJECTIVE_RECOMMENDED.sub(" ", sentence)))
    return bool(DIRECTIVE.search(plain)) or imperative(sentence)


def imperative(sentence: str) -> bool:
    """Whether a sentence opens with an imperative, after its label and a conditional clause
    ("If the test is positive, manage ...").

    >>> imperative("1.2 Offer statins."), imperative("If HbA1c is high, refer to a specialist."), imperative("It is high.")
    (True, True, False)
    """
    return bool(IMPERATIVE.match(_unlabelled(sentence))) or bool(IMPERATIVE.match(_main_clause(sentence)))


def _unlabelled(text: str) -> str:
    """``text`` without its label or bullet ("1.2 ", "Recommendation 3:", "- ")."""
    return LABEL.sub("", text).strip()


def _main_clause(text: str) -> str:
    """``text`` without its label and a leading conditional clause ("If X is high, ...")."""
    return LEADING_CONDITION.sub("", _unlabelled(text))


# words a grade line holds beside its grades ("Strength of Recommendation: Moderate ***")
_TAG_WORDS = re.compile(r"(?i)\b(?:strength|of|recommendations?|level|evidence|quality|grade|class|for|against)\b")


def grade_tag(sentence: str) -> bool:
    """Whether a sentence is only a grade: "[Level A]", "(Strong recommendation; level B)",
    "Strength of Recommendation: Moderate ***" (the grade of the sentence before it).

    >>> grade_tag("[Level A]"), grade_tag("Strength of Recommendation: Moderate ***"), grade_tag("Offer X (Level A).")
    (True, True, False)
    """
    if len(sentence.split()) > 12:  # no grade tag is this long: spares the grade patterns on every sentence
        return False
    rest, found = sentence, False
    for _ in range(3):
        grade = parse_grade(rest)[0]
        if grade is None or grade not in rest:
            break
        rest, found = rest.replace(grade, " ", 1), True
    return found and not re.search(r"[A-Za-z0-9]", _TAG_WORDS.sub(" ", rest))


_GRADE_HEADING = re.compile(r"(?i)^(?:level|grade|class|category)\s+(?:[A-DU]|[1-4]|I{1,3}V?|IV)[abc+]?\s*:?$")


def grade_heading(line: str) -> bool:
    """Whether a line is a bare grade that heads the lines below it ("Level 2", "Class III:"), not
    the trailing grade of the line above ("(Level A)", "Strength of Recommendation: Moderate").

    >>> grade_heading("Level 2"), grade_heading("(Level 2)"), grade_heading("Strength of Recommendation: Strong")
    (True, False, False)
    """
    return bool(_GRADE_HEADING.match(line.strip()))


# a grade that opens a table row, before its statement: ACC/AHA's class and level of evidence
# columns ("2a B-NR In adults with ...", "3: No Benefit B-R ..."), SIGN's grade letter or tick
# ("B NSAIDs should be considered ...", "✓ Reassure ...")
_LEADING_COR = re.compile(r"^(?:COR\s*:?\s*)?(1|2a|2b|3\s*:\s*(?:No\s+Benefit|Harm))\s+(?:LOE\s*:?\s*)?"
                          r"(A|B-R|B-NR|C-LD|C-EO|B|C)\s+(?=[A-Z])")
_LEADING_LETTER = re.compile(r"^([A-D]|[✓√])\s+(?=[A-Z])")
# what no article "A" stands before: a statement opening "A In adults ..." or "A Offer ..." is graded A
_NO_ARTICLE_BEFORE = frozenset("""in for when if where once unless during after before following on at with all any
each every both no most some those these this such the there it we clinicians people women men children""".split())


def _article(rest: str) -> bool:
    """Whether a leading "A" can be the article of ``rest`` ("A CT scan should ...", "A Doppler
    study ..."), not a grade: unless the next word is a preposition, a determiner, a pronoun, a plural
    noun ("A Patients with ...") or an imperative ("A Offer ...")."""
    word = re.match(r"[A-Za-z]+", rest)
    if word is None:
        return False
    w = word.group(0)
    plural = len(w) > 3 and w.lower().endswith("s") and not w.lower().endswith(("ss", "us", "is")) and not w.isupper()
    return not (w.lower() in _NO_ARTICLE_BEFORE or plural or IMPERATIVE.match(rest))


def trailing_grade(unit: str) -> str:
    """A unit that opens with a table row's grade, with the grade moved behind its statement as a
    bracketed tag that :func:`parse_grade` reads; other units unchanged.

    >>> trailing_grade("2a B-NR In adults with diabetes, it is reasonable to prescribe a statin.")
    'In adults with diabetes, it is reasonable to prescribe a statin. (COR 2a, LOE B-NR)'
    >>> trailing_grade("B NSAIDs should be considered for short-term relief.")
    'NSAIDs should be considered for short-term relief. (Grade B)'
    >>> trailing_grade("A CT scan should be done within an hour.")
    'A CT scan should be done within an hour.'
    """
    m = _LEADING_COR.match(unit)
    if m and not (m.group(2) == "A" and _article(unit[m.end():])):
        cor = " ".join(m.group(1).replace(":", ": ").split()).replace(" :", ":")
        return f"{unit[m.end():].rstrip()} (COR {cor}, LOE {m.group(2)})"
    m = _LEADING_LETTER.match(unit)
    if m and not (m.group(1) == "A" and _article(unit[m.end():])):
        tag = "good practice point" if m.group(1) in "✓√" else f"Grade {m.group(1)}"
        return f"{unit[m.end():].rstrip()} ({tag})"
    return unit


def is_recommendation(sentence: str) -> bool:
    """Whether a sentence directs care, reports a finding on the evidence, or carries a grade."""
    return directs(sentence) or parse_grade(sentence)[0] is not None


# what a committee, a review group or a company said while weighing the evidence (NICE appraisals'
# discussion, guideline rationales), and recommendations for research: reported, not recommended
# (the subject opens the sentence, or follows a comma or a linking word: "For this reason the committee concluded")
REPORTED = re.compile(
    r"(?i)(?:^|,\s*|\b(?:reason|therefore|thus|however|so|and|but|overall)\s+)"
    r"(?:(?:the|an?|this|its)\s+(?:\w+\s+){0,2}?(?:committee|ERG|evidence review group|assessment group|company|"
    r"manufacturer|sponsor|(?:clinical|patient)\s+(?:and\s+\w+\s+)?experts?|experts?|authors?|investigators?|"
    r"reviewers?|panel|submission)|it|they)\s+(?:also\s+|therefore\s+|further\s+|then\s+|had\s+)?"
    r"(?:considered|agreed|concluded|noted|stated|explained|advised|recalled|highlighted|heard|was aware|were aware|"
    r"understood|recogni[sz]ed|accepted|acknowledged|believed|discussed|commented|emphasi[sz]ed|argued|"
    r"pointed out|questioned|was concerned|were concerned|observed|queried|thought|felt|judged|"
    r"was satisfied|were satisfied|suggested that)\b")
# wording for an action that the polarity reader does not know
FOR_WORDING = re.compile(r"(?i)\b(?:is|are)\s+(?:\w+ly\s+)?(?:preferred|preferable|acceptable|an?\s+(?:option|alternative)|"
                          r"(?:the\s+)?(?:method|treatment|test|modality|drug|agent) of choice|encouraged|required|warranted|"
                         r"reasonable|also acceptable|the preferred|an? (?:acceptable|reasonable|appropriate|preferred)\s+\w+)\b|"
                         r"\b(?:may|might)\s+be\s+(?:considered|used|given|offered|beneficial|reasonable|useful|an option)\b|"
                         # ACC/AHA's wording of a class 2a recommendation
                         r"\bcan\s+be\s+(?:useful|effective|beneficial)\b|"
                         # AAOS: "Moderate evidence supports MRI as ..." (graded by its strength line)
                         r"^(?:strong|moderate|limited)\s+evidence\s+supports\b")
# "is not suitable / encouraged / advised": against, whatever the polarity reader says
AGAINST_WORDING = re.compile(r"(?i)\b(?:is|are)\s+not\s+(?:encouraged|suitable|advised|appropriate|acceptable|preferred)\b|"
                             r"\b(?:is|are)\s+(?:potentially\s+)?harmful\b|\bweak against\b|\bstrong against\b|\bagainst\)|\bsuggests?\s+against\b|"
                             r"^(?:strong|moderate|limited)\s+evidence\s+does\s+not\s+support\b|^discourage\b")
_SUBORDINATE = re.compile(r"(?i)\b(?:whom|if|when|where|unless|which|who)\b[^,;.]*$")
STOP = re.compile(r"(?i)^(?:stop|discontinue|withhold|withdraw)\b")
# a pointer to the rest of the document ("Refer to the full text for ..."), not advice
POINTER = re.compile(r"(?i)^(?:for (?:more|further) (?:details|information)[^,.]{0,60},\s*)?(?:refer to|see|read)\s+"
                      r"(?:the\s+)?(?:[\"'‘“](?:[^\"'’”]{1,60})[\"'’”]\s+(?:section|field|chapter)|\"?(?:full|original|"
                      r"main|complete|section|box|table|appendix|figure|supplement|companion|guideline|"
                      r"clinical considerations))")
# another guideline's advice, cited: "NICE's guideline on anaphylaxis recommends that ...",
# "The 2009 Special Conference of the European Association ... recommended ..."
ELSEWHERE = re.compile(r"(?i)^(?:[^,]{1,60},\s*)?(?:the\s+)?(?:\w+'s|\d{4})\s+(?:[\w-]+\s+){0,3}(?:guidelines?|guidance|conference|"
                        r"statement)\s+(?:on|for|of|in)\b[^.;,]{0,120}?\b(?:recommends|recommended|suggests|suggested|"
                        r"advises|advised)\b")
# a statement that opens with a question ("Which patients should be screened? There is no consensus ...")
QUESTION = re.compile(r"^[^.!?'\"‘“]{8,300}\?")
RESEARCH = re.compile(r"(?i)\brecommendations?\s+for\s+(?:further\s+)?research\b|\bresearch recommendations?\b|"
                      r"^(?:further|more|additional)\s+(?:research|studies|study|trials?)\s+(?:is|are)\s+"
                      r"(?:required|needed|warranted)")


_STILL_ADVISES = re.compile(r"(?i)\b(?:should|must|do not|avoid|offer|consider)\b")


def reported(statement: str) -> bool:
    """Whether a statement reports rather than recommends: a committee's or review group's
    discussion, another guideline's advice cited, a recommendation for research, or a question.

    >>> reported("The committee agreed that people should be offered a choice."), reported("Offer a choice.")
    (True, False)
    """
    first = next(iter(sentences(_unlabelled(statement))), (0, 0, statement))[2]
    if RESEARCH.search(first) and not _STILL_ADVISES.search(first) or QUESTION.match(first) and not imperative(first):
        return True
    return bool(REPORTED.search(first) or ELSEWHERE.match(first))


def advises_against(statement: str) -> bool:
    """Whether wording the polarity reader does not know says "do not": "X is not suitable for ...",
    "we suggest against", a grade "... Against"; not inside a condition ("If metformin is not
    appropriate, offer ...", "people for whom surgery is not suitable").

    >>> advises_against("Ulipristal is not suitable for women with asthma."), advises_against(
    ...     "If a statin is not suitable, offer ezetimibe.")
    (True, False)
    """
    bare = _main_clause(statement)
    return any(not _SUBORDINATE.search(bare[:m.start()]) for m in AGAINST_WORDING.finditer(bare))


def pointer(statement: str) -> bool:
    """Whether a statement only points to another part of the document ("Refer to the full text")."""
    return bool(POINTER.match(_unlabelled(statement)))


def advises_for(statement: str) -> bool:
    """Whether wording the polarity reader does not know says "do this": an imperative ("Ensure
    ...", "If X, refer ...") or "is preferred / acceptable / an option"; "Stop X once ..." is a
    when-to-stop, not a recommendation for or against.

    >>> advises_for("Ensure that patients are informed."), advises_for("Stop phototherapy at 15 mg/dL.")
    (True, False)
    """
    return (imperative(statement) or bool(FOR_WORDING.search(statement))) and not STOP.match(_main_clause(statement))
