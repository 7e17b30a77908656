"""Language gating: a question is answered from passages in its own language, or, when the index
holds one other language, from a reformulation the generator writes in that language.

Example::

    >>> from medr2.formulate.language import language_family, language_refusal, target_language
    >>> [language_family(v) for v in ("eng", "en-US", "Chinese", "zh-CN", "fr")]
    ['en', 'en', 'zh', 'zh', 'fr']
    >>> target_language("zh", {"en"}), target_language("en", {"en"})
    ('English', '')
    >>> language_refusal("zh", {"en"}, "offline", "糖尿病") is not None
    True
"""

from __future__ import annotations

from typing import Optional

from medr2.util.text import detect_language

# Languages a reformulation can be asked to translate into (the index's, when it holds one).
LANGUAGE_NAMES = {"en": "English", "zh": "Chinese"}


def language_family(value: Optional[str]) -> str:
    """'en' / 'zh' for the spellings loaders keep from metadata ('eng', 'English', 'zh-CN', 'chi'...)."""
    v = (value or "en").strip().lower()
    if v.startswith(("zh", "chi", "cmn", "zho")):
        return "zh"
    if v.startswith(("en", "eng")):
        return "en"
    return v


def question_language(text: str) -> str:
    return language_family(detect_language(text))


def index_languages(language_counts: dict[str, int]) -> set[str]:
    """The language families an index holds passages in (its store's ``languages`` counts)."""
    return {language_family(k) for k, v in language_counts.items() if v}


def target_language(question_lang: str, index_langs: set[str]) -> str:
    """The language a reformulation should be written in: the index's own when the question is in
    another and the index holds a single language; '' when no translation is needed or possible."""
    if question_lang not in index_langs and len(index_langs) == 1:
        return LANGUAGE_NAMES.get(sorted(index_langs)[0], "")
    return ""


def language_refusal(question_lang: str, index_langs: set[str], reformulation_method: Optional[str],
                     query: str) -> Optional[str]:
    """The insufficient-evidence answer when nothing in the index can be read for this question
    (its language is not held, and no LLM reformulation carried it into a held one), else None."""
    if question_lang in index_langs:
        return None
    if reformulation_method == "llm" and question_language(query) in index_langs:
        return None
    return (f"Insufficient evidence: the question is in '{question_lang}' but the index holds only "
            f"{sorted(index_langs)} passages; ask in that language or ingest sources in '{question_lang}'.")
