"""Evidence level e in 1..9 (1 = most credible) and f_h = 10 - e (Med-R2).

Decided in this order, the first that speaks wins: metadata (source type ``guideline`` is fixed
at e = 3 as the paper does; PubMed publication types; encyclopedia entries and books), then
study-design cues in the title and text, then (optionally) the LLM, else
``appraise.unknown_level``. The levels of every design live in config
(``appraise.levels``).

Example::

    >>> from medr2.appraise.evidence_level import detect_design, f_h
    >>> detect_design("Metformin and lactic acidosis: a systematic review and meta-analysis")
    'meta-analysis'
    >>> f_h(3)
    7
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Optional

from medr2.formulate.classify import first_cue
from medr2.llm.base import LLM, LLMError, structured

# Study-design cues, most specific first (our patterns).
DESIGN_CUES: list[tuple[str, re.Pattern]] = [
    ("meta-analysis", re.compile(r"\bmeta-?analy[sz](is|es|ed)\b|\bpooled analysis\b|\bnetwork meta", re.I)),
    ("systematic review", re.compile(r"\bsystematic(ally)? (literature )?review|\bcochrane review\b|"
                                     r"\bumbrella review\b|\bprisma\b", re.I)),
    ("guideline", re.compile(r"\b(clinical )?(practice )?guidelines?\b(?! (adherence|compliance|implementation))|"
                             r"\bconsensus statement\b|\bpractice parameter\b|\bposition statement\b", re.I)),
    ("randomized controlled trial", re.compile(r"\brandomi[sz]ed,? (\w+[- ]){0,3}(trial|study)\b|\brandomly "
                                               r"(assigned|allocated)\b|\b(rct|rcts)\b|\bdouble-blind\w*\b|"
                                               r"\bplacebo-controlled\b", re.I)),
    ("non-randomized controlled trial", re.compile(r"\bnon-?randomi[sz]ed (\w+ ){0,2}(trial|study)\b|"
                                                   r"\bquasi-?experimental\b|\bsingle-arm\b|\bopen-label trial\b|"
                                                   r"\bcontrolled before-(and|after)", re.I)),
    ("case-control study", re.compile(r"\bcase-? ?control(led)? (study|studies|design|analysis)\b|"
                                      r"\bmatched controls\b", re.I)),
    ("cohort study", re.compile(r"\bcohort\b|\bprospective(ly)? (study|follow|observational|analysis)|"
                                r"\bretrospective(ly)? (study|review|analysis|cohort|chart)|\blongitudinal (study|"
                                r"follow)|\bregistry\b|\bfollowed (up )?for\b|\bfollow-?up\b|\bretrospectively\b|\bprospectively\b|"
                                r"\bconsecutive (patients|cases|subjects)\b|\bmedical records\b|\bchart review\b|"
                                r"\bhazard ratios?\b|\bincidence of\b|\bpatients who underwent\b", re.I)),
    ("cross-sectional study", re.compile(r"\bcross-?sectional\b|\bsurvey(ed)?\b|\bquestionnaires?\b|"
                                         r"\bprevalence (study|survey)\b|\bdiagnostic accuracy\b|\brespondents\b|"
                                         r"\bsensitivity and specificity\b|\breceiver operating\b|"
                                         r"\binter-?(observer|rater)\b", re.I)),
    ("laboratory or animal study", re.compile(r"\bin vitro\b|\b(mice|mouse|rats?|rabbits?|pigs?|dogs?|sheep)\b|"
                                              r"\banimal model\b|\bcell lines?\b|\bcadaver\w*\b|\bsimulation\b|\bin vivo\b",
                                              re.I)),
    ("case series", re.compile(r"\bcase series\b|\bseries of \d+ (patients|cases)\b|\bwe (reviewed|describe) "
                               r"\d+ (patients|cases)\b", re.I)),
    ("case report", re.compile(r"\bcase report\b|\bwe (report|describe|present) (a|an|the) (case|patient)\b|"
                               r"\ba \d+-year-old (man|woman|boy|girl|male|female|patient)\b", re.I)),
    ("expert opinion", re.compile(r"\bexpert opinion\b|\beditorial\b|\bcommentary\b|\bnarrative review\b|"
                                  r"\bin (my|our) (view|opinion|experience)\b|\bviewpoint\b", re.I)),
]

# PubMed publication types -> design (metadata wins over text cues).
PUBLICATION_TYPES = {
    "meta-analysis": "meta-analysis", "systematic review": "systematic review",
    "practice guideline": "guideline", "guideline": "guideline", "consensus development conference": "guideline",
    "randomized controlled trial": "randomized controlled trial",
    "controlled clinical trial": "non-randomized controlled trial", "clinical trial": "non-randomized controlled trial",
    "observational study": "cohort study", "multicenter study": None, "comparative study": None,
    "case reports": "case report", "editorial": "expert opinion", "comment": "expert opinion",
    "letter": "expert opinion", "review": "expert opinion",
}

SOURCE_TYPES = {"guideline": "guideline", "entry": "encyclopedia", "book": "textbook"}


def detect_design(text: str) -> Optional[str]:
    return first_cue(DESIGN_CUES, text)


def design_from_metadata(source_type: str, publication_types: list[str]) -> Optional[str]:
    if source_type in SOURCE_TYPES:
        return SOURCE_TYPES[source_type]
    found = [PUBLICATION_TYPES.get(p.strip().lower()) for p in publication_types]
    found = [f for f in found if f]
    if not found:
        return None
    order = list(dict.fromkeys(name for name, _ in DESIGN_CUES))
    return min(found, key=lambda d: order.index(d) if d in order else len(order))


def f_h(level: int) -> int:
    """Med-R2's evidence score: 10 - e, in [1, 9]."""
    if not 1 <= level <= 9:
        raise ValueError(f"evidence level must be 1..9, got {level}")
    return 10 - level


@dataclass
class EvidenceLevel:
    level: int
    design: str
    source: str  # "metadata", "text", "llm" or "default"

    def to_dict(self) -> dict:
        return asdict(self)


class EvidenceLeveler:
    def __init__(self, levels: dict[str, int], unknown_level: int = 9, llm: Optional[LLM] = None):
        bad = {k: v for k, v in levels.items() if not 1 <= int(v) <= 9}
        if bad:
            raise ValueError(f"appraise.levels must be 1..9: {bad}")
        self.levels = levels
        self.unknown_level = unknown_level
        self.llm = llm

    def _level(self, design: str) -> int:
        return int(self.levels.get(design, self.unknown_level))

    def assess(self, source_type: str, publication_types: list[str], title: str, text: str) -> EvidenceLevel:
        d = design_from_metadata(source_type, publication_types)
        if d is not None:
            return EvidenceLevel(self._level(d), d, "metadata")
        d = detect_design(f"{title}\n{text}")
        if d is not None:
            return EvidenceLevel(self._level(d), d, "text")
        if self.llm is not None:
            from medr2.appraise.prompts import level_messages

            names = list(self.levels)
            schema = {"type": "object", "additionalProperties": False, "required": ["design"],
                      "properties": {"design": {"type": "string", "enum": [*names, "unknown"]}}}
            try:
                out = structured(self.llm, level_messages(text, title, names), schema, max_tokens=30)
                if out["design"] != "unknown":
                    return EvidenceLevel(self._level(out["design"]), out["design"], "llm")
            except LLMError:
                pass  # recorded as default below; the model's failure does not sink the passage
        return EvidenceLevel(self.unknown_level, "unknown", "default")
