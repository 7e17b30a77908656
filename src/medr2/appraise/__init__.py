"""Appraise: coarse reranking of the retrieved candidates (fine EBM reranking builds on it)."""
