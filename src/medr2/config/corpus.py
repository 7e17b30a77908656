"""Corpus settings: how documents are read (ingest), cut into passages (segment) and where the
index keeps them (index: embedded, Milvus, PostgreSQL).

    >>> from medr2.config.corpus import SegmentConfig
    >>> SegmentConfig().passage_tokens
    180
"""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from medr2.config.base import Section


class SegmentConfig(Section):
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


class IngestConfig(Section):
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


class IndexConfig(Section):
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
