"""How a recommendation answer reads (medr2.apply.recommend chooses the recommendations): the
quoted list with grades and citations (the extractive answer), the grade labels, the block the
generator is shown, and the check that replaces a generated answer that only points at the list.

Example::

    >>> from medr2.schema import Recommendation
    >>> r = Recommendation(n=1, passage_id="p1", statement="Quinine should be avoided (Level A).",
    ...                    grade="Level A", strength="strong")
    >>> print(as_answer(RecommendationAnswer([r], ["Should quinine treat cramps?"], [], False, 2), 1).answer)
    - [strong] Quinine should be avoided (Level A). [1]
"""

from __future__ import annotations

from dataclasses import dataclass, field

from medr2.apply.answer import Answer
from medr2.apply.focus import content_words
from medr2.schema import Recommendation


@dataclass
class RecommendationAnswer:
    recommendations: list[Recommendation]
    parts: list[str]  # the parts of the question
    uncovered: list[str]  # parts no chosen recommendation covers
    insufficient: bool
    searched: int  # statements considered
    answer: Answer = field(default_factory=lambda: Answer(""))
    # the generator judged the statements (recommend.llm_answer = "quote"); False when it could not
    judged: bool = False


# Answer.method of an answer that is the quoted list of recommendations: without a generator, and
# when the generator's answer only pointed at them (quote_instead)
EXTRACTIVE, QUOTED = "extractive-recommendations", "llm+quoted-recommendations"


def grade_label(r: Recommendation) -> str:
    if r.grade:
        return f"{r.grade}; {r.strength}" if r.strength and r.strength.lower() not in r.grade.lower() else r.grade
    return "ungraded"


def quoted_label(r: Recommendation) -> str:
    """The label before a quoted statement: its strength alone when the quote already shows
    the grade as written, else :func:`grade_label`."""
    if r.grade and r.grade.lower() in r.statement.lower():
        return r.strength or "graded"
    return grade_label(r)


def as_answer(ra: RecommendationAnswer, n_passages: int) -> Answer:
    """The extractive answer: each recommendation quoted with its grade and citation."""
    if ra.insufficient:
        what = (f"{ra.searched} recommendation(s) in {n_passages} passage(s) were read"
                if ra.searched else f"{n_passages} passage(s) were read")
        return Answer("Insufficient evidence: the passages found do not contain a guideline recommendation that "
                      f"applies to this question ({what}).",
                      "", [], [], True, EXTRACTIVE,
                      ["no LLM: recommendation answer (medr2.apply.recommend); abstained"], uncovered=list(ra.parts))
    # the grade leads, so it reads as part of the quote's first sentence, not as a claim of its own
    lines = [f"- [{quoted_label(r)}] {r.statement} [{r.n}]" for r in ra.recommendations]
    if ra.uncovered:
        lines.append("These recommendations do not cover: " + " / ".join(f'"{p}"' for p in ra.uncovered) + ".")
    cited = list(dict.fromkeys(r.n for r in ra.recommendations))
    ids = list(dict.fromkeys(r.passage_id for r in ra.recommendations))
    cont = [f"[{r.n}]'s list items from {', '.join(r.continued_in)}" for r in ra.recommendations if r.continued_in]
    return Answer("\n".join(lines), "", ids, cited, False, EXTRACTIVE,
                  [f"no LLM: {len(ra.recommendations)} applicable recommendation(s) of {ra.searched} read, quoted "
                   "with their grades (medr2.apply.recommend)"]
                  + [f"a list's lead-in ends its passage: {'; '.join(cont)} (the passages after it)"] * bool(cont),
                  recommendations=list(ra.recommendations), uncovered=list(ra.uncovered))


# Words that name the recommendations instead of saying what they say (ours).
_POINTERS = frozenset("""guideline guidelines recommendation recommendations recommend recommends recommended
apply applies applicable evidence passage passages statement statements both all above following listed given
these those answer question""".split())


def states_nothing(answer: str, question: str) -> bool:
    """The generated answer only points at the recommendations: it names them ("guideline",
    "recommendations", "apply"...) and, beside the question's own words, holds nothing else (a
    1.5B model told to "answer with these recommendations" writes "The guideline recommendations
    apply."). An answer in the question's own words alone ("Metformin can be used ...") is a
    verdict, and is kept.

    >>> states_nothing("The guideline recommendations [3] and [5] both apply.", "Can metformin be used at an eGFR of 35?")
    True
    >>> states_nothing("Metformin can be continued at a reduced dose [2].", "Can metformin be used at an eGFR of 35?")
    False
    >>> states_nothing("Metformin can be used at an eGFR of 35.", "Can metformin be used at an eGFR of 35?")
    False
    """
    words = content_words(answer)
    return bool(words & _POINTERS) and not (words - content_words(question) - _POINTERS)


def quote_instead(ans: Answer, ra: RecommendationAnswer, n_passages: int) -> Answer:
    """The answer when the generator's :func:`states_nothing`: the applicable recommendations
    quoted with their grades (:func:`as_answer`), the model's rationale kept, and a note saying
    what was replaced."""
    quoted = as_answer(ra, n_passages)
    note = (f'the generator\'s answer ("{ans.answer[:120]}") named the recommendations without stating them: '
            "they are quoted instead")
    return Answer(quoted.answer, ans.rationale, quoted.citations, quoted.cited, quoted.insufficient,
                  QUOTED, [note, *ans.notes], list(ra.recommendations), list(ra.uncovered))


def prompt_block(ra: RecommendationAnswer) -> str:
    """The recommendations as the generator is shown them: one line each, citation first.

    >>> from medr2.schema import Recommendation
    >>> ra = RecommendationAnswer([Recommendation(n=2, passage_id="p", statement="Offer X.", grade="Level A",
    ...                            strength="strong")], ["Offer X?"], [], False, 1)
    >>> prompt_block(ra)
    '[2] (Level A; strong) Offer X.'
    """
    lines = [f"[{r.n}] ({grade_label(r)}) {r.statement}" for r in ra.recommendations]
    if ra.uncovered:
        lines.append("No recommendation covers: " + "; ".join(ra.uncovered))
    return "\n".join(lines)
