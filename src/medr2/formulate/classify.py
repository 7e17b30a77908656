"""Question classification: EBM category (7) and general question type (12).

Two implementations with one interface:

* :class:`LLMClassifier` asks the generator for both labels under a JSON schema.
* :class:`OfflineClassifier` runs the artefact trained by ``medr2 train-classifier`` (TF-IDF +
  logistic regression on MedQuAD questions, exported as plain arrays, inference in numpy) for
  the EBM category, a cue rule for "cost" (MedQuAD has no cost questions), and cue rules for
  the question type (no labelled data exists for the 12 types).

Example::

    >>> from medr2.formulate.classify import OfflineClassifier
    >>> c = OfflineClassifier.load()
    >>> c.classify("What are the treatments for hypertension?").ebm_category
    'therapy'
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Optional

import numpy as np

from medr2.formulate.labels import EBM_CATEGORIES, QUESTION_TYPES
from medr2.llm.base import LLM, LLMError, structured

SHIPPED = "ebm_classifier.npz"


@dataclass
class Classification:
    ebm_category: str
    question_type: str
    method: str
    confidence: Optional[float] = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Classification":
        return cls(**d)


# -- question type and cost cues (pure) ------------------------------------------------------
_COST = re.compile(r"\b(cost|costs|costly|price|prices|pricing|afford\w*|expens\w*|cheap\w*|economic\w*|"
                   r"reimburse\w*|insurance|qaly|budget|spending|cost-effective\w*)\b", re.I)

_TYPE_RULES: list[tuple[str, re.Pattern]] = [
    ("comparative", re.compile(r"\b(compare[sd]?|comparison|versus|vs\.?|difference between|differ from|"
                               r"better than|worse than|more effective than|superior to|inferior to)\b", re.I)),
    ("hypothetical", re.compile(r"\b(what if|what would happen|what happens if|suppose|supposing|"
                                r"hypothetical\w*|if .{3,80}\bwould\b)", re.I)),
    ("opinion", re.compile(r"\b(do you think|in your opinion|would you recommend|your view|is it wise)\b", re.I)),
    ("evaluative", re.compile(r"\b(how (effective|safe|accurate|reliable|useful|good)|efficacy|effectiveness|"
                              r"accuracy|sensitivity|specificity|is it worth|how well)\b", re.I)),
    ("directive", re.compile(r"^\s*should\b|\b(should (i|we|you|a patient|the patient|patients|he|she|they)|what should|"
                             r"what to do|next step|most appropriate (next )?(step|management|treatment|action))\b",
                             re.I)),
    ("explanatory", re.compile(r"^\s*why\b|\b(how does .{1,60} work|mechanism|explain\w*|what causes|"
                               r"why (is|are|do|does))\b", re.I)),
    ("procedural", re.compile(r"^\s*how (do|does|can|should|to|is|are)\b|\b(how to|steps|procedure for|"
                              r"how (is|are) .{1,60} (treated|diagnosed|managed|performed|done|given|taken))\b",
                              re.I)),
    ("descriptive", re.compile(r"\b(describe|what (are|is) the (symptoms|signs|features|characteristics|stages|types|"
                               r"complications|side effects|treatments?|causes|risk factors|options)|"
                               r"what does .{1,60} look like)\b", re.I)),
    ("factual", re.compile(r"^\s*what (is|are) the\b", re.I)),
    ("definition", re.compile(r"^\s*(what (is|are)( \(are\))?|what's|define|definition of|meaning of)\b", re.I)),
    ("referential", re.compile(r"^\s*(which|who|where|when)\b|\bwhich of the following\b|"
                               r"^\s*what (drug|test|medication|organism|gene|enzyme|hormone|vaccine)", re.I)),
    ("verification", re.compile(r"^\s*(is|are|does|do|can|could|was|were|has|have|did|will|may)\b", re.I)),
]


def first_cue(rules: list[tuple[str, re.Pattern]], text: str) -> Optional[str]:
    """The name of the first rule whose pattern occurs in ``text`` (rules are in precedence order)."""
    return next((name for name, pattern in rules if pattern.search(text)), None)


def question_type_by_cues(question: str) -> str:
    """The first cue rule that fires, in a fixed precedence order; ``factual`` otherwise.

    >>> question_type_by_cues("Is metformin better than insulin for type 2 diabetes?")
    'comparative'
    >>> question_type_by_cues("Does smoking cause bladder cancer?")
    'verification'
    """
    return first_cue(_TYPE_RULES, question) or "factual"


def is_cost_question(question: str) -> bool:
    return bool(_COST.search(question))


# Category cue terms, used when the trained model is unsure (MedQuAD's templated questions do
# not cover the phrasing of clinical questions). Order = precedence.
_EBM_CUES: list[tuple[str, re.Pattern]] = [
    ("prevention", re.compile(r"\b(prevent\w*|prophyla\w*|vaccin\w*|immuni[sz]\w*|avoid getting|reduce the risk)\b",
                              re.I)),
    ("diagnosis", re.compile(r"\b(diagnos\w*|test(s|ing)?|screen\w*|sensitivity|specificity|imaging|biopsy|"
                             r"work-?up|detect\w*|differential)\b", re.I)),
    ("prognosis", re.compile(r"\b(prognos\w*|outlook|surviv\w*|long-term|mortality|life expectancy|recurr\w*|"
                             r"outcomes?|course of|declines?|progress(es|ion)?|how fast|chances? of|"
                             r"likely to (recover|survive|die))\b", re.I)),
    ("etiology", re.compile(r"\b(caus\w*|risk factors?|etiolog\w*|aetiolog\w*|genetic\w*|inherit\w*|"
                            r"pathogen\w*|associated with)\b", re.I)),
    ("therapy", re.compile(r"\b(treat\w*|therap\w*|drugs?|dos(e|es|ing|age)|manag\w*|prescri\w*|medication\w*|"
                           r"first-line|stop(ped)?|start(ed)?|discontinu\w*|surgery|contraindicat\w*|"
                           r"effective|safe(ty)?|side effects?)\b", re.I)),
]


def ebm_category_by_cues(question: str) -> Optional[str]:
    """
    >>> ebm_category_by_cues("Should metformin be stopped when eGFR falls below 30?")
    'therapy'
    """
    return first_cue(_EBM_CUES, question)


# -- offline EBM classifier: numpy inference on exported TF-IDF + logistic regression -----------
_TOKEN = re.compile(r"(?u)\b\w\w+\b")  # scikit-learn's default token pattern


def ngrams(text: str, n_max: int) -> list[str]:
    toks = _TOKEN.findall(text.lower())
    out = list(toks)
    for n in range(2, n_max + 1):
        out.extend(" ".join(toks[i:i + n]) for i in range(len(toks) - n + 1))
    return out


class OfflineClassifier:
    name = "offline"

    def __init__(self, vocab: dict[str, int], idf: np.ndarray, coef: np.ndarray, intercept: np.ndarray,
                 classes: list[str], n_max: int, meta: dict[str, Any]):
        self.vocab, self.idf, self.coef, self.intercept = vocab, idf, coef, intercept
        self.classes, self.n_max, self.meta = classes, n_max, meta
        self.min_confidence = 0.9

    @classmethod
    def load(cls, path: str | Path = "") -> "OfflineClassifier":
        if path:
            p = Path(path)
            if not p.is_file():
                raise FileNotFoundError(f"classifier artefact {p} does not exist; train one with "
                                        "`medr2 train-classifier --medquad medquad.jsonl --out FILE`")
            fh = open(p, "rb")
        else:
            fh = resources.files("medr2.formulate").joinpath("data", SHIPPED).open("rb")
        with fh, np.load(fh, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            vocab = {t: i for i, t in enumerate(json.loads(str(z["terms"])))}
            return cls(vocab, z["idf"].astype(np.float32), z["coef"].astype(np.float32),
                       z["intercept"].astype(np.float32), meta["classes"], int(meta["ngram_max"]), meta)

    def save(self, path: str | Path) -> None:
        terms = [t for t, _ in sorted(self.vocab.items(), key=lambda kv: kv[1])]
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as fh:
            np.savez_compressed(fh, terms=np.array(json.dumps(terms)), idf=self.idf.astype(np.float16),
                                coef=self.coef.astype(np.float16), intercept=self.intercept.astype(np.float32),
                                meta=np.array(json.dumps({**self.meta, "classes": self.classes,
                                                          "ngram_max": self.n_max})))

    def features(self, text: str) -> np.ndarray:
        x = np.zeros(len(self.vocab), dtype=np.float32)
        for g in ngrams(text, self.n_max):
            j = self.vocab.get(g)
            if j is not None:
                x[j] += 1.0
        nz = x > 0
        x[nz] = (1.0 + np.log(x[nz])) * self.idf[nz]  # sublinear tf * idf
        norm = float(np.linalg.norm(x))
        return x / norm if norm > 0 else x

    def proba(self, text: str) -> dict[str, float]:
        z = self.coef @ self.features(text) + self.intercept
        z = np.exp(z - z.max())
        p = z / z.sum()
        return {c: float(v) for c, v in zip(self.classes, p)}

    def classify(self, question: str, min_confidence: Optional[float] = None) -> Classification:
        min_confidence = self.min_confidence if min_confidence is None else min_confidence
        method = self.name
        if is_cost_question(question):
            cat, conf, method = "cost", None, "offline:cost-cue"
        else:
            p = self.proba(question)
            cat = max(p, key=p.get)
            conf = round(p[cat], 4)
            if conf < min_confidence:
                cue = ebm_category_by_cues(question)
                if cue is not None and cue != cat:
                    cat, method = cue, "offline:cue"
        return Classification(cat, question_type_by_cues(question), method, conf)


class LLMClassifier:
    name = "llm"
    SCHEMA = {"type": "object", "additionalProperties": False, "required": ["ebm_category", "question_type"],
              "properties": {"ebm_category": {"type": "string", "enum": EBM_CATEGORIES},
                             "question_type": {"type": "string", "enum": QUESTION_TYPES}}}

    def __init__(self, llm: LLM, retries: int = 2):
        self.llm = llm
        self.retries = retries

    def classify(self, question: str) -> Classification:
        from medr2.formulate.prompts import classify_messages

        out = structured(self.llm, classify_messages(question), self.SCHEMA, max_tokens=60, retries=self.retries)
        return Classification(out["ebm_category"], out["question_type"], self.name)


def classify_with_fallback(primary, offline: OfflineClassifier, question: str) -> tuple[Classification, str]:
    """Classify with ``primary``; if the model fails, say why and use the offline classifier."""
    if primary is None or primary is offline:
        return offline.classify(question), ""
    try:
        return primary.classify(question), ""
    except LLMError as e:
        return offline.classify(question), f"LLM classification failed ({e}); used the offline classifier"
