"""Evidence level e in 1..9 (1 = most credible) and f_h = 10 - e (Med-R2).

Decided in this order, the first that speaks wins: metadata (source type ``guideline`` is fixed
at e = 3 as the paper does; PubMed publication types; encyclopedia entries and books), then
study-design cues in the title and text, then (optionally) the LLM, else
``appraise.unknown_level``. The levels of every design live in config
(``appraise.levels``).

With a trained design model (``appraise.level_method = "trained"``, the default;
:mod:`medr2.appraise.design_model`) the text is read by the model as well: when metadata is
silent, a model verdict at least ``appraise.design_min_confidence`` sure wins, unless a cue names
a design the model cannot judge (trained on fewer than ``appraise.design_min_support`` examples
of it, e.g. expert opinion or case series); otherwise the cues decide when they fire, then the
LLM (if configured), then the model's best guess (source ``model``), so the model leaves no
passage of a paper at the default level.
``appraise.level_method = "cues"`` is the cue detector alone.

Example::

    >>> from medr2.appraise.evidence_level import EvidenceLeveler, detect_design, f_h
    >>> detect_design("Metformin and lactic acidosis: a systematic review and meta-analysis")
    'meta-analysis'
    >>> f_h(3)
    7
    >>> EvidenceLeveler({"cohort study": 6}).assess("paper", [], "", "We measured it once.").source
    'default'
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Optional

from medr2.appraise.design_model import DesignModel
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
    source: str  # "metadata", "text", "model", "llm" or "default"

    def to_dict(self) -> dict:
        return asdict(self)


class EvidenceLeveler:
    """``design_model``: a trained :class:`~medr2.appraise.design_model.DesignModel` (None: the
    cue detector alone); ``min_confidence``: appraise.design_min_confidence; ``min_support``:
    appraise.design_min_support (designs with fewer training examples never overrule a cue)."""

    def __init__(self, levels: dict[str, int], unknown_level: int = 9, llm: Optional[LLM] = None,
                 design_model=None, min_confidence: float = 1.0, min_support: int = 1):
        bad = {k: v for k, v in levels.items() if not 1 <= int(v) <= 9}
        if bad:
            raise ValueError(f"appraise.levels must be 1..9: {bad}")
        self.levels = levels
        self.unknown_level = unknown_level
        self.llm = llm
        self.model = design_model
        self.min_confidence = min_confidence
        counts = getattr(design_model, "meta", {}).get("per_design", {}) if design_model is not None else {}
        self.judged = {d for d, n in counts.items() if n >= min_support}  # designs the model may overrule cues on

    @classmethod
    def from_config(cls, cfg, llm: Optional[LLM] = None) -> "EvidenceLeveler":
        """The leveler an ``AppraiseConfig`` asks for (``level_method``, ``design_model``,
        ``design_min_confidence``); ``llm`` is asked only when ``cfg.level_llm`` is on."""
        model = DesignModel.load(cfg.design_model) if cfg.level_method == "trained" else None
        return cls(cfg.levels, cfg.unknown_level, llm if cfg.level_llm else None, model, cfg.design_min_confidence,
                   cfg.design_min_support)

    def _level(self, design: str) -> int:
        return int(self.levels.get(design, self.unknown_level))

    def assess(self, source_type: str, publication_types: list[str], title: str, text: str) -> EvidenceLevel:
        d = design_from_metadata(source_type, publication_types)
        if d is not None:
            return EvidenceLevel(self._level(d), d, "metadata")
        best = None
        d = detect_design(f"{title}\n{text}")
        if self.model is not None:
            p = self.model.proba(f"{title}\n{text}", source_type)
            best = max(p, key=p.get)
            if p[best] >= self.min_confidence and (d is None or d in self.judged):
                return EvidenceLevel(self._level(best), best, "model")
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
        if best is not None:
            return EvidenceLevel(self._level(best), best, "model")
        return EvidenceLevel(self.unknown_level, "unknown", "default")
