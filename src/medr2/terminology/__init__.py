"""Medical terminologies, read once for the whole package (a ground layer): one reader per
source (:mod:`medr2.terminology.sources`: drug names, ICD-10, HPO, MeSH, user synonym files,
Chinese term lists, GB/T 16751), one normalisation of names (:func:`norm`,
:mod:`medr2.terminology.normalize`) and the JSON cache of built tables
(:mod:`medr2.terminology.cache`).

Two consumers build on it: the knowledge graph's entity library (:mod:`medr2.kg.entities`) and
the reformulator's synonym table (:mod:`medr2.formulate.terms`).

Example::

    >>> from medr2.terminology import norm
    >>> norm("Chronic Kidney Disease (CKD)")
    'chronic kidney disease ckd'
"""

from medr2.terminology.normalize import norm

__all__ = ["norm"]
