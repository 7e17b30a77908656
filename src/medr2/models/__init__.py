"""Models medr2 trains itself and ships (each rebuilt by a medr2 command from public data):
``reranker/`` is the default coarse reranker, written by ``medr2 train-reranker`` and read by
:mod:`medr2.search.cross_encoder`; ``doc_type/`` (``medr2 train-doctype``) gives f_g's
document-type distribution and ``design/`` (``medr2 train-design``) the study design when
metadata is silent (:mod:`medr2.appraise`). Each ``card.json`` records data, sizes, steps, time
and held-out scores."""
