"""Weak labels for the trained appraisal ingredients, built by written rules from public data
(the shared data folder: PubMedQA, NGC, OpenStax, MedQuAD, MedlinePlus, case reports).

Documents are read with medr2's own loaders and segmented as ``medr2 ingest`` segments them, so
a training passage is what the index stores (title and heading path as its prefix).

* **Document types** (f_g): a passage's rhetorical type follows from where it stands: the
  PubMedQA section it is (:data:`PUBMED_SECTION_TYPES`, results split by :func:`results_type`),
  the MedQuAD question type it answers (:data:`MEDQUAD_QTYPE_TYPES`), the NGC field it fills
  (:data:`NGC_FIELD_TYPES`; recommendations by :func:`recommendation_type`), OpenStax glossary,
  learning objectives and Anatomy & Physiology body text, MedlinePlus summaries (definition) and
  case reports (narration).
* **Study designs** live in :mod:`medr2.appraise.design_labels`.

Splits are by document (a hash of its key), so passages of one document never straddle them:
:func:`heldout` documents (10%) are kept for the hand-labelled evaluation set and never trained
on; :func:`is_dev` picks the dev documents among the rest.

Example::

    >>> from medr2.appraise.weak_labels import results_type, recommendation_type, heldout
    >>> results_type("Sensitivity was 92% and specificity 85% for the new test.")
    'evaluation'
    >>> results_type("Mortality was lower in the surgical group than in controls (4% vs 9%).")
    'comparison'
    >>> recommendation_type("Class II: Evidence from well-designed cohort studies.")
    'classification'
    >>> recommendation_type("Clinicians should offer statins to adults with diabetes.")
    'command'
    >>> heldout("ngc:7") == heldout("ngc:7")
    True
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from medr2.ingest.loaders.corpora import medlineplus_row, medquad_record, ngc_record, openstax_record, pubmedqa_record
from medr2.ingest.segment import segment
from medr2.schema import Document, DocumentMeta, Passage, Section, SourceType, prefixed_text

HELDOUT_FRACTION = 0.10  # documents kept for the hand-labelled evaluation set (never trained on)


class WeakLabelError(ValueError):
    """The public data needed for a weak label source is missing or malformed."""


def bucket(key: str, salt: str) -> float:
    """A stable number in [0, 1) for ``key`` (sha256 of salt and key)."""
    return int(hashlib.sha256(f"{salt}\x1f{key}".encode("utf-8")).hexdigest()[:12], 16) / float(16 ** 12)


def heldout(group: str) -> bool:
    """Whether a document is kept for the evaluation set (no training rule ever sees it)."""
    return bucket(group, "appraise-eval") < HELDOUT_FRACTION


def is_dev(group: str, fraction: float) -> bool:
    return bucket(group, "appraise-dev") < fraction


@dataclass(frozen=True)
class Example:
    text: str  # what the model reads (the embedding text: title and heading path, then the passage)
    label: str
    source: str  # the rule that gave the label, e.g. "pubmedqa:Methods"
    group: str  # the document (splits keep it on one side)


@dataclass(frozen=True)
class Unit:
    """A segmented passage with its document: what the rules look at."""

    corpus: str
    doc: Document
    passage: Passage
    ordinal: int  # position of the passage in its document

    @property
    def group(self) -> str:
        return self.doc.doc_id

    def embedding_text(self) -> str:
        return prefixed_text(self.doc.title, self.passage.heading_path, self.passage.text)


# -- the rules ------------------------------------------------------------------------------

# PubMedQA section labels (upper-cased) -> type. Results are split by results_type; mixed
# labels (e.g. "METHODS AND RESULTS") and the population/setting labels get none.
PUBMED_SECTION_TYPES = {
    **dict.fromkeys(["OBJECTIVE", "OBJECTIVES", "PURPOSE", "AIM", "AIMS", "STUDY OBJECTIVE",
                     "AIMS AND OBJECTIVES", "GOAL"], "purpose"),
    **dict.fromkeys(["BACKGROUND", "INTRODUCTION", "CONTEXT", "RATIONALE"], "explanation"),
    **dict.fromkeys(["METHODS", "METHOD", "MATERIALS AND METHODS", "MATERIAL AND METHODS", "PATIENTS AND METHODS",
                     "SUBJECTS AND METHODS", "DESIGN", "STUDY DESIGN", "METHODOLOGY"], "process"),
    **dict.fromkeys(["RESULTS", "RESULT", "FINDINGS"], "results"),
    **dict.fromkeys(["CONCLUSIONS", "CONCLUSION"], "argumentation"),  # LONG_ANSWER, the abstract's conclusion
}

_ACCURACY = re.compile(r"\b(sensitivity|specificity|accuracy|predictive values?|auc|area under|kappa|"
                       r"agreement|reliability|correlat\w+)\b", re.I)
_COMPARED = re.compile(r"\b(compared|versus|vs\.?|than|differ\w*|higher|lower|greater|fewer|similar|"
                       r"no significant|significantly)\b", re.I)


def results_type(text: str) -> Optional[str]:
    """A results section: test accuracy or agreement -> evaluation; group contrasts ->
    comparison; otherwise no label."""
    if _ACCURACY.search(text):
        return "evaluation"
    if _COMPARED.search(text):
        return "comparison"
    return None


# MedQuAD qtype -> type (first passage of the answer). frequency, research, considerations and
# support groups have no clear rhetorical type and get none.
MEDQUAD_QTYPE_TYPES = {
    "information": "definition", "symptoms": "description", "treatment": "problem-solving",
    "inheritance": "explanation", "causes": "cause-and-effect", "genetic changes": "cause-and-effect",
    "susceptibility": "cause-and-effect", "exams and tests": "process", "outlook": "prediction",
    "complications": "prediction", "stages": "classification", "prevention": "instruction",
}

# NGC fields -> type (fields not listed, e.g. bibliographic ones, get none).
NGC_FIELD_TYPES = {
    "Major Recommendations": "recommendations",
    "Guideline Objective(s)": "purpose",
    "Rating Scheme for the Strength of the Evidence": "classification",
    "Rating Scheme for the Strength of the Recommendations": "classification",
    "Description of Methods Used to Collect/Select the Evidence": "process",
    "Description of the Methods Used to Analyze the Evidence": "process",
    "Description of Methods Used to Formulate the Recommendations": "process",
    "Description of Method of Guideline Validation": "process",
    "Description of Implementation Strategy": "instruction",
    "Potential Benefits": "evaluation",
    "Cost Analysis": "evaluation",
    "Potential Harms": "cause-and-effect",
    "Qualifying Statements": "condition",
    "Contraindications": "condition",
}

_GRADE_DEFINITION = re.compile(r"^\W*(\(?(class|level|grade|category|strength|quality|type)\b[^\n:]{0,30}[:.)–-]|"
                               r"definitions?\b)", re.I)
_DIRECTIVE = re.compile(r"\b(should|must|is (not )?recommended|are (not )?recommended|recommends?|"
                        r"do not|avoid|consider|offer|is indicated|are indicated)\b", re.I)


def recommendation_type(text: str) -> Optional[str]:
    """An NGC "Major Recommendations" passage: a grade definition -> classification; a directive
    -> command; otherwise (evidence summaries, lists) no label."""
    if _GRADE_DEFINITION.search(text):
        return "classification"
    if _DIRECTIVE.search(text):
        return "command"
    return None


_EXERCISE = re.compile(r"\b(Review Questions|Critical Thinking|Multiple Choice|Fill in the Blank|Short Answer|"
                       r"True/False|Interactive Link|Chapter Review|Key Concepts and Summary|Matching)\b")
_OBJECTIVES = re.compile(r"Learning Objectives|Chapter Objectives|By the end of this (section|chapter), you will be "
                         r"able to")


def openstax_type(unit: Unit) -> Optional[str]:
    """Glossary -> definition; learning objectives -> purpose; Anatomy & Physiology body text ->
    explanation (the book explains how the body works); exercises, prefaces and other books' body
    text get none."""
    path, text = unit.passage.heading_path, unit.passage.text
    if path and path[-1] == "Glossary":
        return "definition"
    if _OBJECTIVES.search(text):
        return "purpose"
    if _EXERCISE.search(text) or "preface" in unit.doc.title.lower():
        return None
    if unit.doc.meta.extra.get("book", "").startswith("Anatomy"):
        return "explanation"
    return None


def doc_type_label(unit: Unit) -> Optional[str]:
    """The weak document type of a passage, or None when no rule gives one."""
    c, p = unit.corpus, unit.passage
    if c == "pubmedqa":
        t = PUBMED_SECTION_TYPES.get((p.heading_path[-1] if p.heading_path else "").upper())
        return results_type(p.text) if t == "results" else t
    if c == "medquad":
        return MEDQUAD_QTYPE_TYPES.get(unit.doc.meta.extra.get("qtype", "")) if unit.ordinal == 0 else None
    if c == "ngc":
        t = NGC_FIELD_TYPES.get(p.heading_path[-1] if p.heading_path else "")
        return recommendation_type(p.text) if t == "recommendations" else t
    if c == "openstax":
        return openstax_type(unit)
    if c == "medlineplus":
        return "definition" if unit.ordinal == 0 else None
    if c == "case_reports":
        return "narration"
    return None


# -- reading the public data ----------------------------------------------------------------

def _need(path: Path) -> Path:
    if not path.is_file():
        raise WeakLabelError(f"{path} is missing: the weak labels are built from the shared public data folder")
    return path


def _jsonl(path: Path) -> Iterator[dict]:
    with _need(path).open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def excluded_pmids(data: Path) -> set[str]:
    """PubMedQA abstracts never trained on: the 500 test questions' (= MIRAGE's PubMedQA*) and
    every 12th PMID in string order, a superset of the 80 hand-labelled abstracts of
    bench/data/evidence_levels_pubmedqa.jsonl (drawn by that rule)."""
    pq = pubmedqa_raw(data)
    test = json.loads(_need(data / "benchmarks" / "pubmedqa" / "test_ground_truth.json").read_text("utf-8"))
    return set(map(str, test)) | set(sorted(pq)[::12])


_PQ_CACHE: dict[Path, dict] = {}


def pubmedqa_raw(data: Path) -> dict:
    p = _need(data / "benchmarks" / "pubmedqa" / "ori_pqal.json")
    if p not in _PQ_CACHE:
        _PQ_CACHE.clear()
        _PQ_CACHE[p] = json.loads(p.read_text("utf-8"))
    return _PQ_CACHE[p]


def _pubmedqa_docs(data: Path) -> Iterator[Document]:
    pq, skip = pubmedqa_raw(data), excluded_pmids(data)
    for pmid in sorted(pq):
        if pmid in skip:
            continue
        doc = pubmedqa_record(pmid, pq[pmid], "pubmedqa")
        if (pq[pmid].get("LONG_ANSWER") or "").strip():
            doc.sections.append(Section(title="Conclusions", text=pq[pmid]["LONG_ANSWER"].strip(),
                                        labels=["CONCLUSIONS"]))
        yield doc


def _case_report_docs(data: Path) -> Iterator[Document]:
    for i, rec in enumerate(_jsonl(data / "corpora" / "mixed_samples" / "case_reports_en.jsonl")):
        text = (rec[0] if isinstance(rec, list) else str(rec)).strip()
        title, _, body = text.partition(": ")
        if len(title) > 200 or not body:
            title, body = "", text
        yield Document(doc_id=f"case_report:{i}", title=title, source_type=SourceType.paper,
                       sections=[Section(title="", text=body)], meta=DocumentMeta(origin="case_reports", language="en"))


def _pubmed299_docs(data: Path) -> Iterator[Document]:
    p = _need(data / "corpora" / "pubmed" / "pubmed_abstracts_299.json")
    for i, s in enumerate(json.loads(p.read_text("utf-8"))):
        title, _, body = s.strip().partition("\n")
        if body.strip():
            yield Document(doc_id=f"pubmed299:{i}", title=title.strip(), source_type=SourceType.paper,
                           sections=[Section(title="", text=body.strip())],
                           meta=DocumentMeta(origin="pubmed299", language="en"))


def _nice_docs(data: Path) -> Iterator[Document]:
    for i, rec in enumerate(_jsonl(data / "corpora" / "guidelines" / "raw_guideline_chunks_en.jsonl")):
        text = (rec[0] if isinstance(rec, list) else str(rec)).strip()
        if text:
            yield Document(doc_id=f"nice_chunk:{i}", title="", source_type=SourceType.guideline,
                           sections=[Section(title="", text=text)], meta=DocumentMeta(origin="nice", language="en"))


def _medlineplus_docs(data: Path) -> Iterator[Document]:
    with _need(data / "corpora" / "encyclopedia" / "medline_health_topics_en.csv").open(encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            if (row.get("summary") or "").strip():
                yield medlineplus_row(row, "medlineplus")


def _medquad_docs(data: Path) -> Iterator[Document]:
    for rec in _jsonl(data / "corpora" / "medquad" / "medquad.jsonl"):
        d = medquad_record(rec, "medquad")
        if d is not None:
            yield d


def _openstax_docs(data: Path) -> Iterator[Document]:
    for name in ("anatomy_physiology_2e", "microbiology"):
        for rec in _jsonl(data / "corpora" / "textbooks" / f"{name}.jsonl"):
            yield openstax_record(rec, name)


def _ngc_docs(data: Path) -> Iterator[Document]:
    for rec in _jsonl(data / "corpora" / "guidelines" / "ngc_summaries.jsonl"):
        yield ngc_record(rec, "ngc")


CORPORA: dict[str, Callable[[Path], Iterator[Document]]] = {
    "pubmedqa": _pubmedqa_docs, "medquad": _medquad_docs, "ngc": _ngc_docs, "openstax": _openstax_docs,
    "medlineplus": _medlineplus_docs, "case_reports": _case_report_docs,
    # never trained on for document types: drawn only for the evaluation set
    "pubmed299": _pubmed299_docs, "nice": _nice_docs,
}
TRAINED_CORPORA = ("pubmedqa", "medquad", "ngc", "openstax", "medlineplus", "case_reports")


def units(data: Path, corpus: str, keep: Callable[[Document], bool] = lambda d: True,
          min_chars: int = 100) -> Iterator[Unit]:
    """Segmented passages of one corpus's documents that ``keep`` accepts (short fragments under
    ``min_chars`` are skipped: the guideline segmenter leaves list items as passages)."""
    for doc in CORPORA[corpus](Path(data)):
        if not keep(doc):
            continue
        for n, p in enumerate(segment(doc)):
            if len(p.text.strip()) >= min_chars:
                yield Unit(corpus, doc, p, n)
