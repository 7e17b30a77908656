"""Appraise: the fine EBM appraisal of the coarse set (evidence level, document-type fit,
usefulness, F, the fine order and relevance floor, conflicts)."""
