"""Text helpers every stage shares: the language of a text and an approximate token count.

Example::

    >>> detect_language("Metformin in chronic kidney disease"), detect_language("糖尿病患者的二甲双胍")
    ('en', 'zh')
    >>> count_tokens("Metformin, 500 mg."), count_tokens("糖尿病患者")
    (5, 5)
"""

from __future__ import annotations

import re

# one token: a CJK ideograph, a run of word characters, or one punctuation mark
TOKEN_RE = re.compile(r"[\u3400-\u9fff\uf900-\ufaff]|\w+|[^\w\s]", re.UNICODE)


def detect_language(text: str) -> str:
    """'zh' when CJK ideographs dominate the letters of the text, else 'en'."""
    sample = text[:4000]
    cjk = sum(1 for ch in sample if "\u4e00" <= ch <= "\u9fff")
    latin = sum(1 for ch in sample if ch.isascii() and ch.isalpha())
    return "zh" if cjk > 0 and cjk >= latin / 4 else "en"


def count_tokens(text: str) -> int:
    """Approximate model tokens: words, punctuation marks and CJK characters each count one."""
    return len(TOKEN_RE.findall(text))
