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

# what follows "may be" in a description rather than in advice ("may be associated with", "may be the most
# important asset", "may be possible", "may be a referral"); any other "may be ..." counts as advice
_NOT_ADVICE_AFTER_MAY_BE = (
    r"(?:associated|related|linked|due|caused|attributable|explained|influenced|affected|informed|compromised|"
    r"possible|impossible|difficult|unsuitable|more|less|most|higher|lower|greater|larger|smaller|similar|"
    r"different|substantially|present|absent|seen|found|observed|detected|common|rare|likely|unlikely|able|"
    r"unable|true|false|large|small|limited|poorly|because|made|adopted|modified|rejected|justified|"
    r"the\s+(?!preferred|treatment|first|best|recommended|method|drug|test)|"
    r"a\s+(?!reasonable|useful|suitable|good|safe|preferred|candidate|treatment|first|second)|"
    r"an\s+(?!option|alternative|appropriate|effective|acceptable|adjunct|important))\b")
DIRECTIVE = re.compile(
    r"(?i)\b(?:should|must|shall|recommend(?:s|ed)?|suggest(?:s|ed)?|advise[sd]?|"
    r"(?:is|are)\s+(?:not\s+)?(?:indicated|contraindicated|preferred|advised|warranted|required|necessary)|"
    r"consider(?:ed)?|offer(?:ed)?|avoid(?:ed)?|do not|"
    r"(?:is|are)\s+(?:also\s+|not\s+|generally\s+|usually\s+)?(?:an?\s+)?(?:reasonable|appropriate|acceptable|suitable)|"
    r"(?:is|are)\s+(?:an?\s+)?(?:option|first[- ]line|(?:the\s+)?(?:treatment|method|test|modality|drug|agent) of choice)|"
    r"(?:is|are)\s+(?:not\s+|strongly\s+)?encouraged|no recommendations?|(?:makes?|made) no recommendation|"
    r"recommendations? (?:can ?not|could not) be made|cannot (?:make|provide|give) (?:a )?recommendation|it is (?:\w+\s+)?(?:important|essential|advisable|vital|crucial) "
    r"(?:that|to (?!(?:note|remember|recogni[sz]e|emphasi[sz]e|understand|acknowledge|mention|point out|reali[sz]e|"
    r"stress|evaluate the)\b))|"
    r"may\s+(?:be\s+(?!" + _NOT_ADVICE_AFTER_MAY_BE + r")|"
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
    r"counsel|instruct|educate|teach|reassure|warn)\b(?!-)"
    # the word as a noun: "Support for this approach", "Base excess", "use of rescue medication", "Record numbers"
    r"(?!\s+(?:of|for|results?|numbers?|excess|analysis|linkage|was|were|is|are|has|have)\b)",
    re.I)
# a conditional clause before an imperative: "If HPV testing is performed, manage using ..."
LEADING_CONDITION = re.compile(r"(?i)^(?:if|when|where|once|after|before|unless|until|in|for)\b[^,;:]{1,150},\s*")
# wording that looks like a directive but reports: "these findings suggest", "was considered to be related"
REPORTED_WORDING = re.compile(
    r"(?i)\b(?:findings|results|data|evidence|stud(?:y|ies)|analys[ie]s|trials?|this|these|it)\s+(?:also\s+|may\s+|"
    r"might\s+)?suggest(?:s|ed)?\b|\b(?:has|have|had)\s+been\s+suggested\b|\b(?:was|were)\s+considered\b")
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
                    r"R\d+(?:\.\d+)*\s*[.:)-]\s*|\d+(?:\.\d+)*[.)]\s+|\d+(?:\.\d+)+\s+|[a-z][.)]\s+)?")
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
    bare = LABEL.sub("", sentence).strip()
    return bool(IMPERATIVE.match(bare)) or bool(IMPERATIVE.match(LEADING_CONDITION.sub("", bare)))


def is_recommendation(sentence: str) -> bool:
    """Whether a sentence directs care, reports a finding on the evidence, or carries a grade."""
    return directs(sentence) or parse_grade(sentence)[0] is not None


# what a committee, a review group or a company said while weighing the evidence (NICE appraisals'
# discussion, guideline rationales), and recommendations for research: reported, not recommended
# (the subject opens the sentence, or follows a comma: "Based on evidence, ..., the panel believed")
REPORTED = re.compile(
    r"(?i)^(?:.{1,160}?,\s*)?(?:(?:the|an?|this|its)\s+(?:\w+\s+){0,2}?(?:committee|ERG|evidence review group|assessment group|company|"
    r"manufacturer|sponsor|(?:clinical|patient)\s+(?:and\s+\w+\s+)?experts?|experts?|authors?|investigators?|"
    r"reviewers?|panel|submission)|it|they)\s+(?:also\s+|therefore\s+|further\s+|then\s+|had\s+)?"
    r"(?:considered|agreed|concluded|noted|stated|explained|advised|recalled|highlighted|heard|was aware|were aware|"
    r"understood|recogni[sz]ed|accepted|acknowledged|believed|discussed|commented|emphasi[sz]ed|argued|"
    r"pointed out|questioned|was concerned|were concerned|observed|queried|thought|felt|judged|"
    r"was satisfied|were satisfied|suggested that)\b")
# wording for an action that the polarity reader does not know
FOR_WORDING = re.compile(r"(?i)\b(?:is|are)\s+(?:\w+ly\s+)?(?:preferred|preferable|acceptable|an?\s+(?:option|alternative)|"
                          r"(?:the\s+)?(?:method|treatment|test|modality|drug|agent) of choice|encouraged|required|warranted|"
                         r"reasonable|also acceptable|suitable|appropriate)\b")
# "is not suitable / encouraged / advised": against, whatever the polarity reader says
AGAINST_WORDING = re.compile(r"(?i)\b(?:is|are)\s+not\s+(?:encouraged|suitable|advised|appropriate|acceptable|preferred)\b|"
                             r"\bweak against\b|\bstrong against\b|\bagainst\)")
STOP = re.compile(r"(?i)^(?:stop|discontinue|withhold|withdraw)\b")
# a pointer to the rest of the document ("Refer to the full text for ..."), not advice
POINTER = re.compile(r"(?i)^(?:for (?:more|further) (?:details|information)[^,.]{0,60},\s*)?(?:refer to|see|read)\s+"
                      r"(?:the\s+)?(?:[\"'‘“](?:[^\"'’”]{1,60})[\"'’”]\s+(?:section|field|chapter)|\"?(?:full|original|"
                      r"main|complete|section|box|table|appendix|figure|supplement|companion|guideline|"
                      r"clinical considerations))")
# another guideline's advice, cited: "NICE's guideline on anaphylaxis recommends that ...",
# "The 2009 Special Conference of the European Association ... recommended ..."
ELSEWHERE = re.compile(r"(?i)^(?:the\s+)?(?:\w+'s|\d{4})\s+(?:[\w-]+\s+){0,3}(?:guidelines?|guidance|conference|"
                        r"statement)\s+(?:on|for|of|in)\b[^.;,]{0,120}?\b(?:recommends|recommended|suggests|suggested|"
                        r"advises|advised)\b")
# a statement that opens with a question ("Which patients should be screened? There is no consensus ...")
QUESTION = re.compile(r"^[^.!?'\"‘“]{8,300}\?")
RESEARCH = re.compile(r"(?i)\brecommendations?\s+for\s+(?:further\s+)?research\b|\bresearch recommendations?\b|"
                      r"^(?:further|more|additional)\s+(?:research|studies|study|trials?)\s+(?:is|are)\s+"
                      r"(?:required|needed|warranted)")


def reported(statement: str) -> bool:
    """Whether a statement reports rather than recommends: a committee's or review group's
    discussion, another guideline's advice cited, a recommendation for research, or a question.

    >>> reported("The committee agreed that people should be offered a choice."), reported("Offer a choice.")
    (True, False)
    """
    first = next(iter(sentences(LABEL.sub("", statement).strip())), (0, 0, statement))[2]
    if RESEARCH.search(first) or QUESTION.match(first) and not imperative(first):
        return True
    return bool(REPORTED.match(first) or ELSEWHERE.match(first))


def pointer(statement: str) -> bool:
    """Whether a statement only points to another part of the document ("Refer to the full text")."""
    return bool(POINTER.match(LABEL.sub("", statement).strip()))


def advises_for(statement: str) -> bool:
    """Whether wording the polarity reader does not know says "do this": an imperative ("Ensure
    ...", "If X, refer ...") or "is preferred / acceptable / an option"; "Stop X once ..." is a
    when-to-stop, not a recommendation for or against.

    >>> advises_for("Ensure that patients are informed."), advises_for("Stop phototherapy at 15 mg/dL.")
    (True, False)
    """
    bare = LEADING_CONDITION.sub("", LABEL.sub("", statement).strip())
    return (imperative(statement) or bool(FOR_WORDING.search(statement))) and not STOP.match(bare)
