"""The cheap answering mode for multiple choice: after an instruction, the evidence, the question
and its lettered options, score each option letter by the generator's log-probability as the
next token (prefill only, no generation), and answer with the most probable. No chain of
thought and no citations are produced; the answer is conditioned on every passage in the context.

With ``calibrate`` (answer mode ``loglik-cal``) each letter's log-probability is taken relative
to its log-probability after a content-free prompt: the same instruction, evidence and option
letters with the question and every option text replaced by "N/A" (contextual calibration,
Zhao et al. 2021, "Calibrate Before Use"). It is meant to remove a preference for some letters
whatever the question says (on MedQA-US the bundled 1.5B model answers A 12 times in 100
questions where A is right 26 times, and once with evidence). The content-free prompt shares
the real one's prefix up to the question, so a llama.cpp scorer evaluates only its tail, and
without evidence it is one prompt per number of options (cached). Measured with the bundled
1.5B model it lowers accuracy (MedQA-US 47 to 31, MedMCQA 47 to 33; ``bench/README.md``): its
content-free preferences are not the ones it shows on real questions. It is no default.

The letter, not the option text, is scored: on 30 MMLU-Med questions with the bundled Qwen2.5
1.5B the letter after an instruction was right 20 times, the mean log-probability of
``" X. option text"`` 14 times (the copied option text dilutes the decision in a per-token
mean). The prompt is shared by the options, so a llama.cpp scorer evaluates it once.

Example::

    >>> from medr2.apply.loglik import pick, option_prompt, calibrated
    >>> pick({"A": -1.2, "B": -0.4, "C": -0.4})
    'B'
    >>> pick(calibrated({"A": -1.2, "B": -0.4}, {"A": -2.5, "B": -0.2}))  # B is likely after any question
    'A'
    >>> print(option_prompt("Q?", {"A": "x"}, []))
    Answer the multiple-choice question with the letter of the correct option.
    <BLANKLINE>
    Question: Q?
    Options:
    A. x
    Answer:
"""

from __future__ import annotations

from typing import Optional

from medr2.apply.answer import Answer, EvidenceItem
from medr2.llm.base import LLM, LLMError
from medr2.llm.prompting import fence


def pick(scores: dict[str, float]) -> str:
    """The option with the highest score (the first letter on ties)."""
    return max(sorted(scores), key=lambda k: (scores[k], -ord(k[0])))


def calibrated(scores: dict[str, float], content_free: dict[str, float]) -> dict[str, float]:
    """Each option's log-probability less its log-probability after the content-free prompt (the
    log of p / p_cf: contextual calibration with a diagonal correction; normalising p_cf over the
    letters first would shift every score alike and change no choice)."""
    return {k: s - content_free[k] for k, s in scores.items()}


CONTENT_FREE = "N/A"  # the content-free question and option text of contextual calibration
INSTRUCTION = "Answer the multiple-choice question with the letter of the correct option."
INSTRUCTION_EVIDENCE = ("Answer the multiple-choice question with the letter of the correct option, "
                        "using the evidence where it helps.")


def option_prompt(question: str, options: dict[str, str], evidence: list[EvidenceItem]) -> str:
    parts = [f"[{e.n}] {e.title}\n{fence(e.n, e.text)}" for e in evidence]
    head = (INSTRUCTION_EVIDENCE + "\n\nEvidence:\n" + "\n\n".join(parts) + "\n\n") if parts else INSTRUCTION + "\n\n"
    opts = "\n".join(f"{k}. {v}" for k, v in options.items())
    return f"{head}Question: {question}\nOptions:\n{opts}\nAnswer:"


class LoglikAnswerer:
    def __init__(self, llm: Optional[LLM], calibrate: bool = False):
        if llm is None:
            raise LLMError("log-likelihood answering needs a generator that gives token log-probabilities (--llm)")
        self.llm = llm
        self.calibrate = calibrate

    def _scores(self, prompt: str, letters) -> dict[str, float]:
        scores = {}
        for k in letters:
            lps = self.llm.continuation_logprobs(prompt, f" {k}")
            scores[k] = lps[0] if lps else float("-inf")  # the letter is one token in common vocabularies
        return scores

    def letter_scores(self, question: str, options: dict[str, str], evidence: list[EvidenceItem],
                      graph: Optional[str] = None) -> tuple[dict[str, float], str]:
        """Each option letter's score (calibrated in ``loglik-cal``) and the rationale that shows them."""
        if not options:
            raise ValueError("log-likelihood answering scores options: give the question's options "
                             "(or use --answer-mode generate)")
        head = ("Knowledge graph statements:\n" + graph + "\n\n") if graph else ""
        scores = self._scores(head + option_prompt(question, options, evidence), options)
        why = "log-likelihood of each option letter: " + ", ".join(f"{k} {s:.3f}" for k, s in scores.items())
        if self.calibrate:
            free = self._scores(head + option_prompt(CONTENT_FREE, {k: CONTENT_FREE for k in options}, evidence),
                                options)
            scores = calibrated(scores, free)
            why += ("; after the content-free prompt: " + ", ".join(f"{k} {s:.3f}" for k, s in free.items())
                    + "; calibrated: " + ", ".join(f"{k} {s:.3f}" for k, s in scores.items()))
        return scores, why

    def answer(self, question: str, options: dict[str, str], evidence: list[EvidenceItem],
               graph: Optional[str] = None) -> Answer:
        scores, why = self.letter_scores(question, options, evidence, graph)
        return self.as_answer(scores, why, len(evidence))

    def as_answer(self, scores: dict[str, float], why: str, n_evidence: int) -> Answer:
        return Answer(pick(scores), why, [], [], False, "loglik",
                      [f"log-likelihood mode{' (calibrated)' if self.calibrate else ''}: conditioned on "
                       f"{n_evidence} passage(s); no citations are generated"])
