"""Knowledge-graph settings: the quality-aware guideline graph and TCM-DiffRAG's dual-level graph.

    >>> from medr2.config.kg import KGConfig
    >>> KGConfig().core_min
    0.85
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from medr2.config.base import Section


def _match_scores() -> dict[str, float]:
    # Five matching levels of the guideline-KG paper (exact, human-confirmed synonym, soft
    # suggestion, and two less-supported levels: fuzzy, unmatched). The paper names the levels;
    # the values are ours.
    return {"exact": 1.0, "synonym": 0.9, "suggestion": 0.7, "fuzzy": 0.5, "unmatched": 0.2}


class KGConfig(Section):
    """Quality-aware knowledge graph (guideline-KG paper) and the dual-level graph (TCM-DiffRAG)."""

    # Terminologies for dictionary NER and the canonical entity library: "drugs", "icd10",
    # "hpo", "mesh:PATH" (MeSH mtrees; the tree number gives the entity type),
    # "zh:PATH:TYPE" (one Chinese term a line, e.g. a disease list), "gbt16751:PATH" (GB/T
    # 16751 TCM clinical terms: diseases, syndromes, therapies with English names).
    terminologies: list[str] = Field(default_factory=lambda: ["drugs", "icd10", "hpo"])
    # User synonym files: "term<TAB>synonym|synonym[<TAB>Type]" (confirmed synonyms).
    synonym_files: list[str] = Field(default_factory=list)
    extractors: list[Literal["rules", "structured", "llm"]] = Field(default_factory=lambda: ["rules", "structured"])
    match_scores: dict[str, float] = Field(default_factory=_match_scores)
    fuzzy_min: float = Field(90.0, ge=50, le=100)  # rapidfuzz ratio for the fuzzy level (ours)
    # SchemaConf = 0.30 entity + 0.25 relation + 0.35 type + 0.10 direction (paper).
    schema_weights: dict[str, float] = Field(
        default_factory=lambda: {"entity": 0.30, "relation": 0.25, "type": 0.35, "direction": 0.10})
    # EvidScore = 0.30 agreement + 0.20 support + 0.50 human (paper); a constant or unavailable
    # dimension gives its weight to the others (0.60 / 0.40 without human verification).
    evid_weights: dict[str, float] = Field(
        default_factory=lambda: {"agreement": 0.30, "support": 0.20, "human": 0.50})
    # Passage support saturates: log(1 + n) / log(1 + support_saturation) capped at 1 (ours).
    support_saturation: int = Field(5, ge=1)
    # Q(t) = schema_weight * SchemaConf + (1 - schema_weight) * EvidScore ("a configured weight").
    schema_weight: float = Field(0.5, ge=0, le=1)
    # Tiers (paper): core Q >= 0.85; extended 0.70 <= Q < 0.85; exploratory Q < 0.70.
    core_min: float = 0.85
    extended_min: float = 0.70
    # Graph retrieval (paper): exact link 1.0, segmentation 0.95, fuzzy only when fewer than
    # 3 candidates; up to 2 hops; the passage channel adds the dense top-5.
    link_exact: float = 1.0
    link_segment: float = 0.95
    fuzzy_when_fewer_than: int = 3
    max_hops: int = Field(2, ge=1, le=3)
    hop_decay: float = Field(0.5, gt=0, le=1)  # link relevance per extra hop (ours)
    max_triples: int = Field(30, ge=1)  # triples kept for the prompt (ours)
    dense_passages: int = 5
    # TCM-DiffRAG union retrieval: snippets by similarity, k = 20 in the paper.
    union_k: int = 20
    # Relations whose exploratory triples are withheld from prompts (high-risk).
    high_risk_relations: list[str] = Field(default_factory=lambda: [
        "contraindicated_in", "dose_of", "interacts_with", "not_recommended_for"])
    # Induced schema: a relation's domain/range type needs this share of its typed triples.
    induce_min_share: float = Field(0.2, gt=0, le=1)
    induce_min_support: int = Field(3, ge=1)
    cases: "CasesConfig" = Field(default_factory=lambda: CasesConfig())


class CasesConfig(Section):
    """TCM-DiffRAG's solved-case matching (``--pipeline tcm_diffrag``; medr2.kg.tcm). All ours:
    TCM-DiffRAG states no matching constants; bench/README.md, "TCM-DiffRAG", says what chose them."""

    # solved cases whose paths the prompt shows
    k: int = Field(3, ge=0, le=10)
    # a case's score: this weight x the IDF-weighted share of the question's findings it contains
    # + the rest x the character-bigram cosine of the two texts
    finding_weight: float = Field(0.6, ge=0, le=1)
    # a question finding matches a case finding when this share of the shorter one's character
    # bigrams is shared ("耳鸣" in "耳鸣如潮")
    min_similarity: float = Field(0.6, gt=0, le=1)
    # GB/T 16751 definitions given as evidence: the options' terms first, then the matched paths'
    max_definitions: int = Field(6, ge=0)
    # log-likelihood answers: each option's letter log-probability + this x its support in the two
    # graphs (medr2.kg.tcm.option_scores); 0 leaves the model's scores alone
    path_weight: float = Field(0.0, ge=0)
    # characters of a matched case's reasoning shown in the prompt (0: none), and whether a case
    # lists all its findings or only those it shares with the question (a shorter prompt)
    reasoning_chars: int = Field(300, ge=0)
    shared_findings_only: bool = False
    # passages of the hybrid retrieval (vanilla RAG's pool, coarse order: GB/T entries and solved
    # items) put before the definitions in the evidence window; 0 = definitions only. The union
    # keeps what plain retrieval finds (a solved item asking the same thing) beside the two graphs.
    # 3 chosen on the training fold's case vignettes (bench/README.md, "TCM-DiffRAG": 60 CVR
    # questions, 43.3% against 37.0% without on the 46 both answered, direct 38.3%).
    passages_k: int = Field(3, ge=0, le=20)
    # a question naming fewer case findings than this (symptoms, tongue, pulse:
    # medr2.kg.tcm.findings) is a knowledge item, not a case: no solved case can be matched by its
    # findings, so it is answered as vanilla RAG answers it (hybrid retrieval in coarse order,
    # packed, behind the evidence gate) and the answer's notes say so; 0 = every question through
    # the graphs. medr2.kg.tcm.findings reads none below 2, so 1 and 2 route the same questions.
    # 1 chosen on the training fold's knowledge items (bench/README.md, "TCM-DiffRAG"; 90 questions,
    # each one's own item excluded): 40 right against 35 through the graphs (FKU 19 against 21 of
    # 60, KHC 21 against 14 of 30).
    min_findings: int = Field(1, ge=0)
