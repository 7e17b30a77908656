"""Weak study-design labels from public data, by written rules (the trained design detector's
training data; see :mod:`medr2.appraise.train_design`).

* **PubMedQA abstracts** (not the 500 test ones, not the hand-labelled ones: see
  :func:`medr2.appraise.weak_labels.excluded_pmids`) take the design their MeSH headings name
  (:func:`design_of_mesh`, rules in precedence order: :data:`MESH_RULES`). Abstracts whose
  headings name no design get no label.
* **PubMed abstracts** (``pubmed_abstracts_299.json``) that state a design in specific wording
  (:data:`WORDING_RULES`) take it, and the wording is then masked from the text, so that the
  model learns the rest of the abstract (how such a study reads), not the phrase the cues
  already know.
* **Case reports** (``case_reports_en.jsonl``) are case reports.
* **Not studies**: guideline recommendations (NGC), textbook body text (OpenStax) and
  consumer-health entries (MedlinePlus, MedQuAD) take ``guideline``, ``textbook`` and
  ``encyclopedia``, so a passage without metadata that is no study is not forced into a design.

Documents held out for the document-type evaluation set (:func:`~medr2.appraise.weak_labels.heldout`)
are skipped here too.

Example::

    >>> from medr2.appraise.design_labels import design_of_mesh, wording_design
    >>> design_of_mesh(["Humans", "Retrospective Studies", "Sensitivity and Specificity"])
    'cross-sectional study'
    >>> design_of_mesh(["Animals", "Rats", "Male"])
    'laboratory or animal study'
    >>> design_of_mesh(["Humans", "Female"]) is None
    True
    >>> wording_design("A randomized controlled trial of zinc in children.")
    ('randomized controlled trial', 'A  of zinc in children.')
"""

from __future__ import annotations

import random
import re
from pathlib import Path
from typing import Iterator, Optional

from medr2.appraise.weak_labels import CORPORA, Example, bucket, excluded_pmids, heldout, pubmedqa_raw, units

LAB = "laboratory or animal study"
_LAB_MESH = {"In Vitro Techniques", "Cells, Cultured", "Cell Line", "Cell Line, Tumor", "Manikins",
             "Computer Simulation", "Cadaver", "Disease Models, Animal", "Models, Animal"}

# (design, headings) in precedence order: the first rule with a heading present decides. The
# explicit design headings come first; the weaker hints after them (a diagnostic-accuracy or
# survey heading makes a retrospective study cross-sectional, as a one-time measurement).
MESH_RULES: list[tuple[str, set[str]]] = [
    ("meta-analysis", {"Meta-Analysis as Topic", "Meta-Analysis"}),
    ("systematic review", {"Systematic Reviews as Topic", "Review Literature as Topic"}),
    ("randomized controlled trial", {"Randomized Controlled Trials as Topic", "Random Allocation",
                                     "Double-Blind Method", "Single-Blind Method", "Cross-Over Studies"}),
    ("non-randomized controlled trial", {"Non-Randomized Controlled Trials as Topic", "Controlled Before-After Studies"}),
    ("case-control study", {"Case-Control Studies"}),
    ("cross-sectional study", {"Cross-Sectional Studies"}),
    ("cohort study", {"Cohort Studies", "Longitudinal Studies", "Follow-Up Studies"}),
    ("cross-sectional study", {"Surveys and Questionnaires", "Health Surveys", "Health Care Surveys",
                               "Dental Health Surveys", "Sensitivity and Specificity", "ROC Curve",
                               "Reproducibility of Results", "Observer Variation", "Predictive Value of Tests"}),
    ("cohort study", {"Prospective Studies", "Retrospective Studies", "Survival Analysis",
                      "Proportional Hazards Models"}),
]


def design_of_mesh(meshes: list[str]) -> Optional[str]:
    """The design a PubMed record's MeSH headings name (animal or laboratory studies first: an
    ``Animals`` heading without ``Humans``, or a laboratory heading), else None."""
    m = set(meshes)
    if ("Animals" in m and "Humans" not in m) or m & _LAB_MESH or any(x.startswith(("Rats", "Mice")) for x in m):
        return LAB
    return next((design for design, heads in MESH_RULES if m & heads), None)


# Specific wording only (the detector's broader cues, such as "follow-up", are not labels).
WORDING_RULES: list[tuple[str, re.Pattern]] = [
    ("meta-analysis", re.compile(r"\bmeta-?analy[sz](is|es)\b", re.I)),
    ("systematic review", re.compile(r"\bsystematic (literature )?review\b", re.I)),
    ("randomized controlled trial", re.compile(r"\brandomi[sz]ed,? (double-blind,? |placebo-controlled,? |controlled |"
                                               r"clinical |multicenter )*trials?\b|\brandomly (assigned|allocated)\b",
                                               re.I)),
    ("case-control study", re.compile(r"\bcase-control (study|studies)\b", re.I)),
    ("cohort study", re.compile(r"\b(prospective |retrospective |population-based )?cohort (study|studies)\b", re.I)),
    ("cross-sectional study", re.compile(r"\bcross-sectional (study|survey|studies|analysis)\b", re.I)),
    (LAB, re.compile(r"\b(in vitro|in vivo|mice|rats|cell lines?|cultured cells)\b", re.I)),
]


def wording_design(text: str) -> Optional[tuple[str, str]]:
    """(design, text with that design's wording removed) for the first rule that fires."""
    for design, pattern in WORDING_RULES:
        if pattern.search(text):
            return design, pattern.sub("", text)
    return None


def pubmedqa_examples(data: Path) -> Iterator[Example]:
    """MeSH-labelled PubMedQA abstracts (the excluded and held-out ones skipped)."""
    pq, skip = pubmedqa_raw(data), excluded_pmids(data)
    for pmid in sorted(pq):
        if pmid in skip or heldout(f"pmid:{pmid}"):
            continue
        design = design_of_mesh(pq[pmid].get("MESHES") or [])
        if design:
            yield Example(" ".join(pq[pmid]["CONTEXTS"]), design, "pubmedqa:mesh", f"pmid:{pmid}")


def _pubmed299(data: Path) -> Iterator[Example]:
    for doc in CORPORA["pubmed299"](data):
        found = wording_design(f"{doc.title}\n{doc.full_text()}")
        if found:
            yield Example(found[1], found[0], "pubmed299:wording", doc.doc_id)


def _case_reports(data: Path) -> Iterator[Example]:
    for doc in CORPORA["case_reports"](data):
        if not heldout(doc.doc_id):
            yield Example(f"{doc.title}\n{doc.full_text()}", "case report", "case_reports", doc.doc_id)


def _not_studies(data: Path, rng: random.Random, per_class: int) -> Iterator[Example]:
    picks = {"guideline": ("ngc", lambda u: (u.passage.heading_path or [""])[-1] == "Major Recommendations"),
             "textbook": ("openstax", lambda u: u.passage.heading_path[-1:] != ["Glossary"]),
             "encyclopedia": ("medlineplus", lambda u: True)}
    for label, (corpus, ok) in picks.items():
        pool = [u for u in units(data, corpus, keep=lambda d: not heldout(d.doc_id), min_chars=200) if ok(u)]
        if label == "encyclopedia":
            pool += [u for u in units(data, "medquad", keep=lambda d: not heldout(d.doc_id) and
                                       _medquad_sample(d.doc_id), min_chars=200) if u.ordinal == 0]
        rng.shuffle(pool)
        seen: set[str] = set()
        n = 0
        for u in pool:
            if u.group in seen:
                continue  # one passage per document
            seen.add(u.group)
            yield Example(u.embedding_text(), label, f"{u.corpus}:{label}", u.group)
            n += 1
            if n >= per_class:
                break


def _medquad_sample(doc_id: str) -> bool:
    """A fixed 3% of MedQuAD documents (reading all 16k answers is not needed for a sample)."""
    return bucket(doc_id, "design-medquad") < 0.03


def design_examples(data: str | Path, seed: int = 0, not_study_per_class: int = 80) -> list[Example]:
    """All weak design examples, in a fixed order for a given seed."""
    data = Path(data)
    rng = random.Random(seed)
    out = list(pubmedqa_examples(data)) + list(_pubmed299(data)) + list(_case_reports(data))
    out += list(_not_studies(data, rng, not_study_per_class))
    return out
