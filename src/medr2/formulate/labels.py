"""The label sets of Med-R2 (METHOD-FACTS.md) and the MedQuAD ``qtype`` -> EBM category map.

Example::

    >>> from medr2.formulate.labels import EBM_CATEGORIES, QUESTION_TYPES, DOC_TYPES, ebm_of_qtype
    >>> len(QUESTION_TYPES), len(DOC_TYPES), ebm_of_qtype("outlook")
    (12, 16, 'prognosis')
"""

from __future__ import annotations

EBM_CATEGORIES = ["diagnosis", "therapy", "prognosis", "etiology", "prevention", "cost", "others"]

QUESTION_TYPES = ["factual", "referential", "definition", "explanatory", "descriptive", "directive", "opinion",
                  "procedural", "comparative", "evaluative", "verification", "hypothetical"]

DOC_TYPES = ["argumentation", "definition", "description", "explanation", "purpose", "narration", "process",
             "instruction", "command", "problem-solving", "comparison", "evaluation", "classification",
             "condition", "prediction", "cause-and-effect"]

# One-line descriptions of the 16 document types: the zero-shot f_g scorer embeds them, and
# the LLM prompt shows them. Our wording.
DOC_TYPE_DESCRIPTIONS = {
    "argumentation": "argues for a claim with reasons and evidence, weighing findings to reach a conclusion",
    "definition": "defines what a disease, drug, test or term is",
    "description": "describes the features, signs, symptoms or characteristics of something",
    "explanation": "explains why or how something happens, its mechanism or physiology",
    "purpose": "states the aim or purpose of a treatment, test, study or recommendation",
    "narration": "narrates a sequence of events, such as a patient's case history or the course of a study",
    "process": "describes the steps or stages of a process, such as disease progression or a procedure",
    "instruction": "gives instructions on how to do something, such as dosing or how to perform a test",
    "command": "recommends or directs an action: should, must, is recommended, avoid, do not use",
    "problem-solving": "sets out a clinical problem and the approach or solution to manage it",
    "comparison": "compares two or more treatments, tests or groups and their differences",
    "evaluation": "evaluates effectiveness, accuracy, safety, quality or cost of an intervention",
    "classification": "classifies into types, stages, grades or categories",
    "condition": "states conditions under which something applies: if, when, unless, in patients with",
    "prediction": "predicts outcomes, prognosis, risk or future course",
    "cause-and-effect": "states causes, risk factors and their effects, or what an exposure leads to",
}

# MedQuAD's 39 qtypes onto the EBM categories (data README for the core ones; the drug-leaflet
# types - usage, dose, side effects, interactions, warnings - are therapy questions; the
# remaining administrative or general ones are "others"). Our mapping, here.
MEDQUAD_QTYPE_TO_EBM = {
    "treatment": "therapy", "indication": "therapy", "usage": "therapy", "dose": "therapy",
    "side effects": "therapy", "how effective is it": "therapy", "how does it work": "therapy",
    "interactions with medications": "therapy", "interactions with herbs and supplements": "therapy",
    "interactions with foods": "therapy", "contraindication": "therapy", "severe reaction": "therapy",
    "precautions": "therapy", "important warning": "therapy", "forget a dose": "therapy",
    "causes": "etiology", "inheritance": "etiology", "susceptibility": "etiology", "genetic changes": "etiology",
    "outlook": "prognosis", "complications": "prognosis", "stages": "prognosis",
    "prevention": "prevention", "why get vaccinated": "prevention",
    "exams and tests": "diagnosis", "symptoms": "diagnosis",
    "information": "others", "other information": "others", "frequency": "others", "research": "others",
    "support groups": "others", "when to contact a medical professional": "others", "brand names": "others",
    "brand names of combination products": "others", "storage and disposal": "others",
    "emergency or overdose": "others", "dietary": "others", "considerations": "others",
    "how can i learn more": "others",
}


def ebm_of_qtype(qtype: str) -> str:
    return MEDQUAD_QTYPE_TO_EBM.get(qtype.strip().lower(), "others")
