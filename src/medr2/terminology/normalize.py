"""The normalisation of terminology names: one function, :func:`norm`, for every reader and both
consumers (the knowledge graph's entity library and the reformulator's synonym table).

``norm(term)`` is the lookup key of a name: Unicode NFKC, surrounding space stripped; a name with
a Han character keeps all its characters with the whitespace removed; any other name becomes its
ASCII word tokens (a letter or digit, then letters, digits, ``'`` and ``-``) lower-cased and
joined by single spaces.

``norm(term, ascii_words=True)`` is the key the reformulator's synonym table has always been
built and looked up with: the lower-cased text's ASCII word tokens, nothing else. It differs from
the default only outside ASCII (22,356 of the 254,997 names of the drugs, ICD-10, HPO, MeSH,
Chinese-list and GB/T sources; 22,346 of them Chinese):

* Chinese: kept by the default, dropped (``"糖尿病"`` -> ``""``);
* compatibility characters, folded by NFKC in the default only: Roman numerals (``"type Ⅱ
  diabetes"`` -> ``"type ii diabetes"`` / ``"type diabetes"``), super- and subscripts
  (``"HbA1c²"``), ``™``, ligatures (``"ﬁbrosis"``), full-width letters (``"ＣＫＤ"`` -> ``"ckd"`` / ``""``);
* letters whose lower case is ASCII: lower-casing first turns ``"İ"`` into ``"i"`` plus a
  combining dot (``"İstanbul"`` -> ``"stanbul"`` / ``"i stanbul"``).

The reformulator keeps its key so that its synonyms stay as they were; the tokens of a question
it looks up are ``norm(question, ascii_words=True).split()``.

Example::

    >>> from medr2.terminology.normalize import norm
    >>> norm("  Type-2 Diabetes (T2DM) "), norm("高 血压"), norm("ＣＫＤ")
    ('type-2 diabetes t2dm', '高血压', 'ckd')
    >>> norm("ＣＫＤ and 高血压", ascii_words=True)
    'and'
"""

from __future__ import annotations

import re
import unicodedata

WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9'\-]*")  # a word token of English text (either case)
HAN = re.compile(r"[\u3400-\u9fff]")  # a Chinese character
_LOWER_WORD = re.compile(r"[a-z0-9][a-z0-9'\-]*")


def norm(term: str, *, ascii_words: bool = False) -> str:
    """The lookup key of a name (see the module docstring); ``ascii_words``: the reformulator's."""
    if ascii_words:
        return " ".join(_LOWER_WORD.findall(term.lower()))
    t = unicodedata.normalize("NFKC", term).strip()
    if HAN.search(t):
        return re.sub(r"\s+", "", t)
    return " ".join(w.lower() for w in WORD.findall(t))
