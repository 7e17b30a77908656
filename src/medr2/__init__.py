"""medr2: evidence-based medical question answering with visible evidence.

The package is laid out the way evidence-based medicine works:
``ingest`` (load, segment, heading tree) -> ``index`` (dense, sparse, stores) ->
``search`` (hybrid retrieval) -> ``appraise`` (coarse and fine reranking).
"""

__version__ = "0.1.0"
