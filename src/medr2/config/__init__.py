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
import warnings
from pathlib import Path
from typing import Any, Optional

from pydantic import Field, model_validator

from medr2.config.base import Section
from medr2.config.corpus import IndexConfig, IngestConfig, SegmentConfig
from medr2.config.kg import KGConfig
from medr2.config.llm import LLMConfig
from medr2.config.retrieval import DenseConfig, FusionConfig, QueryConfig, RerankConfig, SparseConfig
from medr2.config.serve import ServeConfig
from medr2.config.stages import (AmtConfig, ApplyConfig, AppraiseConfig, AssessConfig, FormulateConfig, GateConfig,
                                 RecommendConfig)

__all__ = ["AmtConfig", "ApplyConfig", "AppraiseConfig", "AssessConfig", "Config", "GateConfig", "RecommendConfig",
           "ConfigError", "DenseConfig", "FormulateConfig", "FusionConfig", "IndexConfig", "IngestConfig", "KGConfig", "LLMConfig", "MOVED_KEYS",
           "QueryConfig", "RerankConfig", "Section", "SegmentConfig", "ServeConfig", "SparseConfig"]

# Keys that moved to the stage that reads them: (old table, key) -> (new table, key).
MOVED_KEYS: dict[tuple[str, str], tuple[str, str]] = {
    ("appraise", "context_tokens"): ("apply", "context_tokens"),
    ("formulate", "expected_doc_types"): ("appraise", "expected_doc_types"),
}


class Config(Section):
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
    gate: GateConfig = Field(default_factory=GateConfig)
    recommend: RecommendConfig = Field(default_factory=RecommendConfig)
    amt: AmtConfig = Field(default_factory=AmtConfig)
    kg: KGConfig = Field(default_factory=KGConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    index: IndexConfig = Field(default_factory=IndexConfig)

    @model_validator(mode="before")
    @classmethod
    def _moved_keys(cls, data: Any) -> Any:
        """Old config files and old indexes' stored configs name keys where they used to live;
        each is read at its new place with a deprecation warning (a key given at both places
        keeps the new one)."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for (old_t, key), (new_t, new_key) in MOVED_KEYS.items():
            old = data.get(old_t)
            if not isinstance(old, dict) or key not in old:
                continue
            old = dict(old)
            value = old.pop(key)
            data[old_t] = old
            new = dict(data.get(new_t) or {})
            if new_key not in new:
                new[new_key] = value
            data[new_t] = new
            warnings.warn(f"config key [{old_t}] {key} is now [{new_t}] {new_key}; read from its old place "
                          "(move it in your config file; an index made before the move keeps working)",
                          FutureWarning, stacklevel=2)
        return data

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
