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

DIRECTIVE = re.compile(
    r"(?i)\b(?:should|must|shall|recommend(?:s|ed|ation)?|suggest(?:s|ed)?|advise[sd]?|"
    r"(?:is|are)\s+(?:not\s+)?(?:indicated|contraindicated|preferred|advised|warranted|required|necessary)|"
    r"consider(?:ed)?|offer(?:ed)?|avoid(?:ed)?|do not|(?:is|are)\s+(?:an?\s+)?(?:reasonable|appropriate|acceptable)|"
    r"(?:is|are)\s+(?:an?\s+)?(?:option|first[- ]line|treatment of choice)|"
    r"may\s+(?:be|benefit|use|receive|reduce)|can\s+be\s+(?:used|offered|considered|given)|"
    r"there is (?:\w+\s+){0,3}evidence|(?:evidence|data) (?:is|are|was|were) (?:insufficient|inadequate|inconclusive)|"
    r"insufficient evidence)\b")
# wording of an ungraded statement: firm ("should", "is recommended") or conditional ("may")
# NICE-style imperatives that open a recommendation ("Offer ...", "Do not ...", "Stop ...")
IMPERATIVE = re.compile(
    r"^(?:offer|consider|do not|don't|stop|continue|start|measure|check|prefer|expect|advise|reduce|use|give|"
    r"avoid|refer|assess|screen|test|treat|monitor|prescribe|discuss|ensure|explain|arrange|review|repeat|"
    r"perform|obtain|administer|withhold|discontinue|recommend|encourage|think about|be aware|take into account)\b",
    re.I)
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
    """Whether a sentence directs care or reports a finding on the evidence (its wording)."""
    return bool(DIRECTIVE.search(sentence)) or bool(IMPERATIVE.match(LABEL.sub("", sentence).strip()))


def is_recommendation(sentence: str) -> bool:
    """Whether a sentence directs care, reports a finding on the evidence, or carries a grade."""
    return directs(sentence) or parse_grade(sentence)[0] is not None
