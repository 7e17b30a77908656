"""Answer extraction and accuracy, as pure functions (evaluation issue, groundwork).

Two extractors:

* :func:`mirage_letter` applies MIRAGE's own rules, in MIRAGE's order, so its published
  accuracies are reproduced from its stored predictions: the text after the last
  ``"answer_choice": "`` of the first string, stripped; a lone letter; a letter followed by
  " or", " and", "/" or ","; "Option X"; a colon then a letter; a letter followed by ".", a
  double quote or ":"; otherwise "A".
* :func:`extract_letter` is the robust one for our own runs: JSON ``answer`` /
  ``answer_choice``, "Answer: B", a bare letter, or the text of exactly one option; None when
  nothing matches (counted as wrong and reported).

Example::

    >>> from medr2.eval.scoring import mirage_letter, accuracy
    >>> mirage_letter('{"step_by_step_thinking": "...", "answer_choice": "C. Ulnar nerve"}')
    'C'
    >>> accuracy([True, False, True, True])
    (0.75, 0.2165)
"""

from __future__ import annotations

import json
import math
import re
from typing import Optional, Sequence

_LETTERS = "ABCD"

# MIRAGE's rules in order: (pattern, anchored at the start?)
_MIRAGE_RULES: list[re.Pattern] = [
    re.compile(r"^\s*([ABCD])$"),
    re.compile(r"^\s*([ABCD]) or"),
    re.compile(r"^\s*([ABCD]) and"),
    re.compile(r"^\s*([ABCD])/"),
    re.compile(r"^\s*([ABCD]),"),
    re.compile(r"[Oo]ption ([ABCD])"),
    re.compile(r":\s*([ABCD])"),
    re.compile(r"^\s*([ABCD])\."),
    re.compile(r'^\s*([ABCD])"'),
    re.compile(r"^\s*([ABCD]):"),
]


def mirage_letter(prediction: str) -> str:
    text = prediction.split('"answer_choice": "')[-1].strip()
    for rule in _MIRAGE_RULES:
        m = rule.search(text)
        if m:
            return m.group(1)
    return "A"


# the words in any case, the letter a capital ("the answer is a beta blocker" names no option)
_ANSWER_IS = re.compile(r"(?i:answer|choice|option)\s*(?i:is|:)?\s*[:\-]?\s*\(?([A-J])\)?(?![A-Za-z])")
_BARE = re.compile(r"^\s*\(?([A-J])\)?\s*(?:[.):\-]|$)")


def extract_letter(text: str, options: dict[str, str]) -> Optional[str]:
    """The option letter a model's output gives, or None when it gives none unambiguously."""
    valid = {k.upper() for k in options} or set(_LETTERS)
    t = (text or "").strip()
    if not t:
        return None
    try:
        obj = json.loads(t)
        if isinstance(obj, dict):
            for key in ("answer", "answer_choice", "choice"):
                if isinstance(obj.get(key), str):
                    return extract_letter(obj[key], options)
    except (json.JSONDecodeError, RecursionError):
        pass
    m = _BARE.match(t)
    if m and m.group(1).upper() in valid:
        return m.group(1).upper()
    found = [x.upper() for x in _ANSWER_IS.findall(t) if x.upper() in valid]
    if found:
        return found[-1]
    low = t.lower()  # the text of exactly one option, as whole words ("no" is not in "not")
    hits = [k.upper() for k, v in options.items()
            if v and re.search(r"(?<!\w)" + re.escape(v.lower().strip()) + r"(?!\w)", low)]
    return hits[0] if len(hits) == 1 else None


def macro_average(rows: list[dict], key: str = "method") -> dict[tuple[str, str], tuple[float, int]]:
    """MIRAGE's average: per (``key``, model), the unweighted mean of the per-dataset accuracies
    and the number of datasets it covers.

    >>> macro_average([{"method": "m", "model": "x", "accuracy": 40.0}, {"method": "m", "model": "x", "accuracy": 60.0}])
    {('m', 'x'): (50.0, 2)}
    """
    by: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        by.setdefault((r[key], r["model"]), []).append(r["accuracy"])
    return {k: (round(sum(v) / len(v), 2), len(v)) for k, v in sorted(by.items())}


def accuracy(correct: Sequence[bool]) -> tuple[float, float]:
    """(accuracy, std) with std = sqrt(p (1 - p) / N), as MIRAGE reports; both rounded to 4 places."""
    n = len(correct)
    if n == 0:
        return 0.0, 0.0
    p = sum(bool(c) for c in correct) / n
    return round(p, 4), round(math.sqrt(p * (1 - p) / n), 4)


def mcnemar_p(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for paired right/wrong outcomes: ``b`` questions only the
    first method got right, ``c`` only the second (binomial test of b against Bin(b + c, 1/2)).

    >>> mcnemar_p(0, 0), round(mcnemar_p(10, 2), 4), mcnemar_p(3, 3)
    (1.0, 0.0386, 1.0)
    """
    n = b + c
    if n == 0:
        return 1.0
    k = min(b, c)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2 ** n
    return min(1.0, 2 * tail)


def answer_shift(predicted: dict[str, int], gold: dict[str, int]) -> float:
    """How far a method's answers are spread differently from the gold answers: the total
    variation distance 1/2 * sum |p_pred(x) - p_gold(x)| between the two label shares (0: chosen
    as often as each answer is right; 1: never the labels that are right). An answer that is no
    label (``""``: unparsed or abstained) counts as a label of its own. It shows a letter-position
    or yes/no bias that accuracy hides.

    >>> answer_shift({"A": 25, "B": 25, "C": 50}, {"A": 25, "B": 25, "C": 50})
    0.0
    >>> answer_shift({"A": 1, "B": 40, "C": 30, "D": 29}, {"A": 26, "B": 25, "C": 24, "D": 25})
    0.25
    """
    np_, ng = sum(predicted.values()), sum(gold.values())
    if not np_ or not ng:
        raise ValueError("answer_shift needs at least one predicted and one gold answer")
    labels = set(predicted) | set(gold)
    return round(0.5 * sum(abs(predicted.get(x, 0) / np_ - gold.get(x, 0) / ng) for x in labels), 4)


def batch_calibrated(scores: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Batch calibration of letter log-probabilities over a set of questions, leaving each
    question out of its own estimate: each question's option probabilities (normalised over its
    options) are divided by the mean probability of the same letter over the *other* questions,
    and the log of that ratio returned. A letter the model prefers whatever the question loses its
    head start; the argmax of the result is the calibrated answer. Needs two questions at least.

    >>> s = {"q1": {"A": -0.05, "B": -3.0}, "q2": {"A": -0.3, "B": -1.35}, "q3": {"A": -0.1, "B": -2.4}}
    >>> {q: max(c, key=c.get) for q, c in batch_calibrated(s).items()}  # q2's A is weak for this set
    {'q1': 'A', 'q2': 'B', 'q3': 'A'}
    """
    if len(scores) < 2:
        raise ValueError("batch calibration needs at least two questions (each is left out of its own estimate)")
    probs = {}
    for i, s in scores.items():
        top = max(s.values())
        z = top + math.log(sum(math.exp(v - top) for v in s.values()))
        probs[i] = {k: math.exp(v - z) for k, v in s.items()}
    total: dict[str, float] = {}
    count: dict[str, int] = {}
    for p in probs.values():
        for k, v in p.items():
            total[k] = total.get(k, 0.0) + v
            count[k] = count.get(k, 0) + 1
    out = {}
    for i, p in probs.items():
        out[i] = {k: math.log(v) - math.log((total[k] - v) / (count[k] - 1)) if count[k] > 1 else math.log(v)
                  for k, v in p.items()}
    return out
