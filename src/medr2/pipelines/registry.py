"""The one registry of method names: the CLI's choices, the service's modes and the evaluation
harness all read it. A spec is a method class and the flags it runs with.

Example::

    >>> from medr2.pipelines.registry import PIPELINES
    >>> list(PIPELINES)[:3]
    ['direct', 'direct_cot', 'vanilla_rag']
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from medr2.pipelines.amt import LLMAMT
from medr2.pipelines.base import Method
from medr2.pipelines.direct import Direct
from medr2.pipelines.graph import Graph
from medr2.pipelines.medr2 import MedR2
from medr2.pipelines.rag import RAG
from medr2.pipelines.tcm import TCMDiffRAG


@dataclass(frozen=True)
class Spec:
    method: type
    reformulate: bool = False  # the formulate step rewrites the query (Med-R2's reformulator)
    fine_rerank: bool = False  # the fine EBM appraisal with conflict filtering (Med-R2's reranker)
    cot: bool = False  # a chain of thought before the answer


PIPELINES: dict[str, Spec] = {
    "direct": Spec(Direct),
    "direct_cot": Spec(Direct, cot=True),  # MIRAGE's CoT baseline: step-by-step, no retrieval
    "vanilla_rag": Spec(RAG),
    "+reformulator": Spec(RAG, reformulate=True),
    "+reranker": Spec(RAG, fine_rerank=True),
    "+cot": Spec(RAG, cot=True),
    "+reformulator+reranker": Spec(RAG, reformulate=True, fine_rerank=True),
    "+reformulator+cot": Spec(RAG, reformulate=True, cot=True),
    "+reranker+cot": Spec(RAG, fine_rerank=True, cot=True),
    "medr2": Spec(MedR2, reformulate=True, fine_rerank=True, cot=True),  # Med-R2 Algorithm 2
    "kg": Spec(Graph, cot=True),  # quality-weighted graph retrieval + tier-conditioned prompt (ask --kg)
    "llm_amt": Spec(LLMAMT, cot=True),  # LLM-AMT-style baseline
    "tcm_diffrag": Spec(TCMDiffRAG, cot=True),  # solved-case paths + GB/T 16751 definitions (kg cases)
}


def Pipeline(engine, name: str = "medr2", rounds: Optional[int] = None, answer_mode: str = "generate") -> Method:
    """The registered method ``name`` over ``engine`` (``rounds``: the iterating method's T;
    ``answer_mode``: one of medr2.apply.answer.ANSWER_MODES)."""
    if name not in PIPELINES:
        raise ValueError(f"unknown pipeline {name!r}; choose from {', '.join(PIPELINES)}")
    spec = PIPELINES[name]
    return spec.method(engine, name, spec, rounds, answer_mode)


def register(name: str, spec: Spec) -> None:
    """Add a method under ``name`` (a name already taken is an error)."""
    if name in PIPELINES:
        raise ValueError(f"a method named {name!r} is already registered")
    PIPELINES[name] = spec
