"""Sparse retrieval: bm25s tokenisation (stemmed English, jieba for Chinese) and exact BM25.

Index segments store raw term frequencies; scores are computed at query time from the
statistics of all live passages in all segments (N, document frequency, average length), so
adding or removing documents never rebuilds anything and the scores equal those of a single
BM25 index over the whole corpus (Lucene variant, bm25s's default; checked against bm25s in
the tests).

Example::

    >>> from medr2.index.sparse import Tokenizer, bm25_idf, bm25_tf
    >>> Tokenizer().tokens("Metformin for type 2 diabetes")
    ['metformin', 'type', '2', 'diabet']
    >>> round(float(bm25_idf(1, 10) * bm25_tf(1, 10, 10, 1.5, 0.75)), 3)
    0.797
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from medr2.config import SparseConfig
from medr2.util.text import detect_language

_TOKEN = re.compile(r"(?u)\b\w+\b")
_ZH_WORD = re.compile(r"\w", re.UNICODE)


def bm25_idf(df, n_docs):
    """Lucene BM25 idf: log(1 + (N - df + 0.5) / (df + 0.5))."""
    return np.log1p((n_docs - np.asarray(df, dtype=np.float64) + 0.5) / (np.asarray(df, dtype=np.float64) + 0.5))


def bm25_tf(tf, doc_len, avg_len, k1: float, b: float):
    """BM25 term-frequency component as Lucene (and bm25s) compute it: tf / (tf + k1 (1 - b + b dl / avgdl)).

    Lucene dropped the constant (k1 + 1) numerator, which does not change any ranking.
    """
    tf = np.asarray(tf, dtype=np.float64)
    return tf / (tf + k1 * (1 - b + b * np.asarray(doc_len, dtype=np.float64) / avg_len))


class Tokenizer:
    """English: lower-case words, bm25s stopword list, Snowball stems. Chinese: jieba words."""

    def __init__(self, cfg: SparseConfig | None = None):
        import bm25s.stopwords as sw
        import Stemmer

        cfg = cfg or SparseConfig()
        self.cfg = cfg
        self._stem = Stemmer.Stemmer(cfg.stemmer).stemWord if cfg.stemmer else (lambda w: w)
        stop = {"en": sw.STOPWORDS_EN, "english": sw.STOPWORDS_EN, "": ()}.get(cfg.stopwords, sw.STOPWORDS_EN)
        self._stop_en = frozenset(stop)
        self._stop_zh = frozenset(sw.STOPWORDS_CHINESE)
        self._stem_cached = lru_cache(maxsize=200_000)(self._stem)
        self._jieba = None

    def _jieba_tokenizer(self):
        if self._jieba is None:
            import logging

            import jieba

            jieba.setLogLevel(logging.WARNING)
            tk = jieba.Tokenizer()
            for path in self.cfg.jieba_user_dicts:
                tk.load_userdict(path)
            self._jieba = tk
        return self._jieba

    def tokens(self, text: str, language: str | None = None) -> list[str]:
        lang = language or detect_language(text)
        if lang == "zh":
            return self._zh(text)
        out = []
        for w in _TOKEN.findall(text.lower()):
            if w in self._stop_en:
                continue
            out.append(self._stem_cached(w))
        return out

    def _zh(self, text: str) -> list[str]:
        out = []
        for w in self._jieba_tokenizer().lcut(text.lower()):
            w = w.strip()
            if not w or not _ZH_WORD.search(w) or w in self._stop_zh:
                continue
            if w.isascii():
                if w in self._stop_en:
                    continue
                w = self._stem_cached(w)
            out.append(w)
        return out


def score_segment(
    cols: list[tuple[np.ndarray, np.ndarray]], idf: np.ndarray, doc_len: np.ndarray, avg_len: float,
    k1: float, b: float, n_rows: int,
) -> np.ndarray:
    """BM25 scores of every row of one segment for the given query-term columns.

    ``cols`` holds, per query term, the (row indices, term frequencies) of the segment's
    postings; ``idf`` the global idf of each term.
    """
    scores = np.zeros(n_rows, dtype=np.float64)
    for (rows, tfs), w in zip(cols, idf):
        if len(rows):
            np.add.at(scores, rows, w * bm25_tf(tfs, doc_len[rows], avg_len, k1, b))
    return scores

