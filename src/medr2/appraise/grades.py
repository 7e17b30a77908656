"""Guideline grades as written, and the strength each stands for (issue 36): the grade tag or
wording of a recommendation and its normalised strength. Pure functions over text.

Grades are read from the wording of the common schemes (the mapping to a strength is ours, from
each scheme's published definitions):

=====================================  =========================================================
scheme (how it is written)             strength
=====================================  =========================================================
GRADE: "strong/conditional/weak        strong; conditional and weak are ``weak``
recommendation, low-quality evidence"
GRADE codes "1A".."2C", Endocrine      1 ``strong``, 2 ``weak``
Society "(1|++OO)", "(2 ⊕⊕OO)"
ACC/AHA "Class I/IIa/IIb/III,          I ``strong``, IIa ``moderate``, IIb ``weak``, III
Level A"; ESC columns "... . IIa B"    ``strong`` (a firm "no benefit" or "harm")
ACC/AHA since 2015 "COR 2a, LOE B-NR"  1 ``strong``, 2a ``moderate``, 2b ``weak``, 3: No Benefit
(a table row "2a B-NR In adults ...")  ``moderate``, 3: Harm ``strong`` (the scheme's words)
Levels / grades "Level A", "Grade B",  A or I or 1 ``strong``, B or II or 2 ``moderate``, C/D
"Level II", USPSTF "B recommendation", or III/IV ``weak``; U and USPSTF "I statement"
CDC "recommendation category: A",      ``insufficient``
SIGN's leading "B NSAIDs should ..."
bracketed "[IA]", "(I-C)", "II-2D"     the letter: A ``strong``, B ``moderate``, C-E ``weak``
letter + class "(BIII)", "(A-II)"      the letter, as above
"GPP", good practice point (SIGN's     ``consensus``
tick), KDIGO "Practice Point", expert
opinion, consensus
=====================================  =========================================================
"""

from __future__ import annotations

import re
from typing import Callable, Optional

STRENGTHS = ("strong", "moderate", "weak", "consensus", "insufficient")
# order of a recommendation list: stronger first; an ungraded statement ranks by its wording
STRENGTH_RANK = {"strong": 4, "moderate": 3, "consensus": 2.5, "weak": 2, "insufficient": 0}

_LETTER = {"A": "strong", "B": "moderate", "C": "weak", "D": "weak", "E": "weak", "U": "insufficient"}
_ROMAN = {"I": "strong", "II": "moderate", "III": "weak", "IV": "weak"}
_DIGIT = {"1": "strong", "2": "moderate", "3": "weak", "4": "weak"}
# ACC/AHA and ESC classes of recommendation (III: a firm "no benefit" or "harm")
_CLASS = {"I": "strong", "IIA": "moderate", "IIB": "weak", "II": "moderate", "III": "strong", "IV": "weak"}
# not a grade when what follows makes it a study class, a toxicity grade ("grade 3 and 4 events",
# "grade 3 or higher") or a disease class ("class III obesity")
_NOT_A_GRADE = (r"(?!\s*(?:stud|trial|article|paper|report|data\b|patients?\b|(?:and|or|to)\s+(?:[1-5]|I{1,3}|IV)\b|"
                r"[-–/]\s*(?:[1-5]|I{1,3}|IV)\b|adverse|events?\b|toxicit|AEs?\b|or (?:higher|above|worse|greater)|obes))")

# (pattern, strength of the match) in the order tried; the first match in the statement wins
# wording-only grades ("strongly recommends", "consensus") count only when no tag is present
_GRADES: list[tuple[re.Pattern, Callable[[re.Match], str], bool, Callable[[re.Match], bool]]] = []


def _grade(pattern: str, strength: Callable[[re.Match], str], wording: bool = False,
           valid: Callable[[re.Match], bool] = lambda m: True) -> None:
    _GRADES.append((re.compile(pattern, re.I), strength, wording, valid))


_FUNCTION_WORDS = {"all", "any", "each", "every", "the", "a", "an", "most", "some", "before", "after", "in", "at",
                   "for", "of", "to", "on", "by", "with", "during", "and", "or"}


def _abbreviation(m: re.Match) -> bool:
    """A bracketed tag that spells the initials of the words before it: "artificial intelligence (AI)"."""
    tag = re.sub(r"[^A-Za-z]", "", m.group(0)).upper()
    words = re.findall(r"[A-Za-z]+", m.string[max(0, m.start() - 200):m.start()])[-len(tag):]
    return len(words) == len(tag) and "".join(w[0] for w in words).upper() == tag \
        and not any(w.lower() in _FUNCTION_WORDS for w in words)


# GRADE wording, with the quality of evidence when it follows
_grade(r"\b(strong|weak|conditional|moderate|discretionary)\s+recommendations?"
       r"(?:\s*(?:[,;]|based on|with)\s*(?:an?\s+)?(?:(?:very\s+)?(?:high|moderate|low)(?:[- ]quality|[- ]level|[- ]certainty)?"
       r"(?:\s+(?:of\s+)?evidence|\s+(?:quality|certainty)\s+of\s+(?:the\s+)?evidence|\s+level\s+of\s+evidence)?|"
       r"(?:evidence\s+level|level\s+of\s+evidence|quality\s+of\s+evidence)\s*:?\s*[A-D1-4]\b))?",
       lambda m: {"strong": "strong", "moderate": "moderate"}.get(m.group(1).lower(), "weak"))
# ACC/AHA class with its level of evidence
_grade(r"\bClass\s+(III|IIa|IIb|II|I|IV)\b" + _NOT_A_GRADE + r"(?:\s*[,;(]?\s*(?:Level(?:\s+of\s+Evidence)?\s*:?\s*)"
       r"([A-C](?:-[A-Z]{1,3})?))?\)?",
       lambda m: _CLASS[m.group(1).upper()])
# ACC/AHA since 2015, class of recommendation and level of evidence: "(COR 2a, LOE B-NR)"; the
# strengths are the scheme's own words (1 strong, 2a moderate, 2b weak, 3: No Benefit moderate,
# 3: Harm strong); a table row's leading "2a B-NR" is written this way by :func:`trailing_grade`
_grade(r"\bCOR\s*:?\s*(1|2a|2b|3)(?:\s*:\s*(No\s+Benefit|Harm))?(?!\w)"
       r"(?:\s*[,;]?\s*LOE\s*:?\s*(?:A|B-R|B-NR|C-LD|C-EO|B|C)(?![\w-]))?",
       lambda m: {"1": "strong", "2a": "moderate", "2b": "weak"}.get(
           m.group(1).lower(), "moderate" if (m.group(2) or "").lower().startswith("no") else "strong"))
# Endocrine Society and GRADE with symbols: (1|++OO), (2|+OOO), (1 ⊕⊕⊕O); 1 strong, 2 weak
_grade(r"\(\s*([12])\s*(?:\||\s)\s*[+O⊕○◯]{3,4}\s*\)", lambda m: "strong" if m.group(1) == "1" else "weak")
# ESC's table columns after a statement: "... reduce mortality. I A", "... in sinus rhythm. IIa B"
_grade(r"(?<=[.;)])\s+(I|IIa|IIb|III)\s+([ABC])\s*$",
       lambda m: _CLASS[m.group(1).upper()])
# USPSTF statements
_grade(r"\bI\s+statement\b", lambda m: "insufficient")
# a capital letter after "Grade", an article or a bracket: "a recommendation for research" and a sentence
# that opens "A recommendation in favor of ..." are no grade A
_grade(r"(?:\bgrade\s+|(?<=[(\[])\s*|\b(?:an?|the|USPSTF)\s+)((?-i:[A-D]))\s+recommendation\b",
       lambda m: _LETTER[m.group(1).upper()])
# named levels and grades: Level A, Grade B, Level II, Level 1, Level of evidence: C, CDC's
# "recommendation category: A"
_grade(r"\b(?:Level|Grade|Strength(?:\s+of\s+recommendation)?|SOR|recommendation\s+category)\s*"
       r"(?:of\s+evidence\s*)?[:=]?\s*"
       r"(I{1,3}V?|IV|[A-DU]|[1-4])(?:[abc+]|-[abc1-3])?(?!\w)" + _NOT_A_GRADE,
       lambda m: (_ROMAN.get(m.group(1).upper()) or _LETTER.get(m.group(1).upper()) or _DIGIT[m.group(1)]))
# a strength written as a word after its label: "(Strength of Recommendation: Strong For)"
_grade(r"\bStrength\s+of\s+recommendation\s*[:=]\s*(strong|moderate|weak|conditional|limited|optional|"
       r"insufficient|consensus)\b(?:\s+(?:for|against))?",
       lambda m: {"strong": "strong", "moderate": "moderate", "insufficient": "insufficient",
                  "consensus": "consensus"}.get(m.group(1).lower(), "weak"))
# GRADE codes 1A..2C in brackets or parentheses
_grade(r"[\[(]\s*([12])\s*([A-D])\s*[\])]", lambda m: _DIGIT[m.group(1)] if m.group(1) == "1" else "weak")
# evidence class + letter grade in brackets or parentheses: [IA], [IIb-B], (I-C), (II-2D)
_grade(r"[\[(]\s*(?:I{1,3}|IV)(?:-?[1-3]|[ab])?\s*-?\s*([A-E])\s*[\])]", lambda m: _LETTER[m.group(1).upper()])
_grade(r"\b(?:I{1,3}|IV)-[1-3]\s*([A-E])\b", lambda m: _LETTER[m.group(1).upper()])
# a single letter grade in brackets at the end of a statement: "... prevent ARF [D]."
_grade(r"\[\s*([A-D])\s*\]\s*\.?$", lambda m: _LETTER[m.group(1).upper()])
# GRADE's wording without a tag: "the panel strongly recommends"
_grade(r"\bstrongly\s+(?:recommend(?:s|ed)?|advise[sd]?)\b", lambda m: "strong", wording=True)
# strength letter + evidence class, in brackets at the end of a statement (IDSA, ASCCP, DHHS): "(BIII)", "(A-II)"
_grade(r"[\[(]\s*((?-i:[A-E])|(?-i:[a-e]))\s*-?\s*((?-i:I{1,3}|IV|i{1,3}|iv))\s*[\])](?=\s*(?:[.;]|$))",
       lambda m: _LETTER[m.group(1).upper()], valid=lambda m: not _abbreviation(m))
# consensus as the basis of a recommendation; a mention of consensus ("2019 consensus guidelines",
# "consensus was not reached", "a formal consensus process") is no grade
_grade(r"\b(?:GPP|good practice point|practice point|expert opinion|consensus[- ]based(?:\s+recommendation)?|consensus recommendation|"
       r"(?:based on)\s+(?:(?:an?|the)\s+)?(?:(?:expert|panel|formal|informal|group)\s+)?consensus|"
       r"(?:formal|informal|expert|panel)\s+consensus(?!\s+(?:guidelines?|statements?|conferences?|documents?|"
       r"process(?:es)?|methods?|meetings?|panels?|development))|"
       r"consensus\s+(?:of|among)\s+(?:the\s+)?(?:experts?|panel|committee|group|work(?:ing)?\s+group))\b|"
       r"[(\[]\s*(?:(?:by|expert|panel|based on)\s+)?consensus\s*[)\]]",
       lambda m: "consensus", wording=True)


def parse_grade(text: str) -> tuple[Optional[str], Optional[str]]:
    """(grade as written, normalised strength) of the first grade tag in ``text``; (None, None)
    when it holds none.

    >>> parse_grade("Thymectomy is an option (Class II).")
    ('Class II', 'moderate')
    >>> parse_grade("Offer preoperative blockade. (1|++OO)")
    ('1|++OO', 'strong')
    >>> parse_grade("On the basis of 2 Class I studies, quinine is effective.")
    (None, None)
    """
    for wording in (False, True):
        best = None
        for pattern, strength, is_wording, valid in _GRADES:
            m = next((x for x in pattern.finditer(text) if valid(x)), None) if is_wording == wording else None
            if m and (best is None or m.start() < best[0].start()):
                best = (m, strength)
        if best is not None:
            m, strength = best
            return m.group(0).strip(" ()[].").strip(), strength(m)
    return None, None
