"""Section headings inside a guideline's text (issue 36): the short line that heads a group of
recommendations ("Management of Severe CDI") or the guideline's own key question, read in
context, and the heading a recommendation sits under. Pure functions over text."""

from __future__ import annotations

import re
from typing import Optional

from medr2.appraise.grades import parse_grade
from medr2.appraise.wording import BULLET, DIRECTIVE, is_recommendation

# A section heading inside a guideline's text: a short line that is not a sentence ("Management of
# Mild, Moderate, and Severe CDI"), or the guideline's own key question ("What is the best method
# for treatment of patients with cancer with established VTE?"). Labels that name no topic
# ("Clinical Question 4", "Level C", "Summary Statements", "Yes") are not headings.
_TITLE_LINE = re.compile(r"^[A-Z][^.;:!?]{2,120}$")
_QUESTION_LINE = re.compile(r"^[A-Z][^.!?]{8,300}\?$")  # one sentence
_TOPICLESS = re.compile(
    r"^(?i:(?:clinical |key )?questions?|key (?:action )?statements?|levels?(?: of evidence)?|"
    r"(?:strength|grades?|quality)(?: of)? (?:the )?(?:recommendations?|evidence)|grading(?: system)?|"
    r"(?:major |summary of )?recommendations?|summary(?: statements?)?|conclusions?|background|definitions?|"
    r"notes?|yes|no|none|unknown|not (?:stated|applicable|specified)|n/a|(?:internal|external) peer review|"
    r"methods?|references?|remarks?|rationale|comments?|certainty of (?:the )?evidence|good practice (?:statements?|points?)|"
    r"strong|moderate|weak|conditional|low|very low|high)\b[\s\dA-Z().,-]*$")
SECTION_NUMBER = re.compile(r"^\d+(?:\.\d+)*\s+(?=[A-Z])")
_ENDS_BLOCK = re.compile(r"[.;:!?)\]]\s*$")


def is_section_heading(line: str) -> bool:
    """A line that heads a topic of a guideline's text (see ``_TITLE_LINE``, ``_QUESTION_LINE``):
    not a bullet, not a label such as "Level B", not a line carrying a grade.

    >>> [is_section_heading(x) for x in ("Management of Severe CDI", "Clinical Question 4", "Offer X.",
    ...  "At what platelet count can surgery be performed?", "- Treatment", "Level C Only expert opinion",
    ...  "Offer metformin as first-line therapy")]
    [True, False, False, True, False, False, False]
    """
    line = SECTION_NUMBER.sub("", line.strip())
    if not line or BULLET.match(line) or _TOPICLESS.match(line) or parse_grade(line)[1] is not None:
        return False
    if _QUESTION_LINE.match(line):
        return len(line.split()) <= 45
    # a short directive without a full stop ("Offer metformin first") is a recommendation, not a
    # title; "Use of stents in primary PCI" is a title
    return (bool(_TITLE_LINE.match(line)) and len(line.split()) <= 14
            and ((line.lower().startswith("use of ") and not DIRECTIVE.search(line)) or not is_recommendation(line)))


def _body(line: str) -> bool:
    """A line of running text or a bullet (what follows a heading)."""
    line = line.strip()
    return bool(BULLET.match(line)) or bool(_ENDS_BLOCK.search(line)) or len(line.split()) >= 8


def heading_lines(lines: list[str]) -> set[int]:
    """The indices of the lines that head a section, read in context: a heading candidate
    (:func:`is_section_heading`) after the start of the text or a line that ends a sentence or
    block or a short list item (so a hard-wrapped continuation such as "Vancomycin 125 mg daily" is
    not one), followed
    by running text, a bullet or the end of the text; two candidates in a row are a heading and
    its sub-heading, three or more a list or a table (none is a heading).

    >>> heading_lines(["- Test stools.", "Management of Severe CDI", "- Give vancomycin."])
    {1}
    >>> heading_lines(["- Patients with severe CDI should be treated with oral", "Vancomycin 125 mg four times daily",
    ...                "rather than metronidazole."])
    set()
    >>> heading_lines(["Agents:", "Argatroban", "Bivalirudin", "Lepirudin", "- Monitor the aPTT."])
    set()
    """
    cand = [is_section_heading(x) for x in lines]
    out: set[int] = set()
    i = 0
    while i < len(lines):
        if not cand[i]:
            i += 1
            continue
        j = i
        while j + 1 < len(lines) and cand[j + 1]:
            j += 1
        prev = lines[i - 1].strip() if i else ""
        # after the start, a line that ends a sentence or block (not a list's lead-in "... avoided:",
        # unless a short label "Definitions:"), or a short list item ("- Misoprostol")
        ends = bool(_ENDS_BLOCK.search(prev)) and (not prev.endswith(":") or len(prev.split()) <= 3)
        after_block = not prev or ends or bool(BULLET.match(prev) and len(prev.split()) <= 6)
        nxt = lines[j + 1].strip() if j + 1 < len(lines) else ""
        if after_block and j - i < 2 and (not nxt or (_body(nxt) and not nxt[0].islower())):
            out.update(range(i, j + 1))
        i = j + 1
    return out


def section_heading(before: list[str]) -> Optional[str]:
    """The section a recommendation sits under: ``before`` are the texts before it in its document
    (its own passage's text up to the statement last), nearest last; the nearest line that is a
    section heading (:func:`is_section_heading`), or None.

    >>> section_heading(["Diagnosis", "- Test stools.", "Management of Severe CDI", "- Give vancomycin."])
    'Management of Severe CDI'
    >>> section_heading(["- Offer X."]) is None
    True
    """
    for text in reversed(before):
        lines = [x for x in text.splitlines() if x.strip()]
        heads = heading_lines(lines)
        if heads:
            return SECTION_NUMBER.sub("", lines[max(heads)].strip())
    return None
