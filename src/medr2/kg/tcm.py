"""TCM-DiffRAG's personalized graph, deterministically: solved cases decomposed into triple paths
(findings -> syndrome -> therapy -> formula), linked to GB/T 16751 terms, and matched to a new
case by its findings.

TCM findings (symptoms, tongue, pulse) and syndrome, therapy and formula names form a closed
vocabulary, so no model is needed to read a case:

* :func:`findings`: the clauses of a case description (demographics and the question left out),
  tongue and pulse written one way ("舌质红" -> "舌红", "舌苔黄" -> "苔黄");
* :func:`aspect`: what a question asks (syndrome, disease, therapy, formula, herb, acupoint,
  finding or other), from its wording and its answer;
* :func:`case_path`: a solved case's path: each finding ``indicates_syndrome`` (or its disease,
  ...), the syndrome is ``treated_by`` its therapy, the therapy ``prescribes`` its formula;
  other questions give (question, aspect, answer);
* :class:`TermIndex`: GB/T 16751 terms with their definition passages, read from an index that
  ingested the standard (the general graph the cases link into);
* :class:`CaseMatcher`: the solved cases ranked for a new question by finding overlap (character
  bigram containment, IDF-weighted) and whole-text similarity.

Example::

    >>> findings("某女，48岁。头晕胀痛，耳鸣，梦多不眠，舌质红，苔黄，脉弦。")
    ['头晕胀痛', '耳鸣', '梦多不眠', '舌红', '苔黄', '脉弦']
    >>> aspect("治疗应首选的方剂是（  ）。", "龙胆泻肝汤")
    'formula'
    >>> containment("耳鸣", "耳鸣如潮")
    1.0
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional

_HAN = re.compile(r"[\u3400-\u9fff]")
_SENTENCE = re.compile(r"[。！？!?\n]")
_CLAUSE = re.compile(r"[，,；;、：:（）()“”\"\s]+")
_BLANK = re.compile(r"（\s*）|\(\s*\)")
_DEMOGRAPHIC = re.compile(r"^(?:患者|患儿|病人|病者|某[男女]|[男女]性?|[男女]孩|已婚|未婚|\d+(?:\.\d+)?(?:岁|个月|月|天)|"
                          r"[一二三四五六七八九十]+岁)$")
_LEAD = re.compile(r"^(?:现症见|现症|症见|证见|证候表现为|临床表现为|表现为|刻下|刻诊|诊见|就诊时|兼见|伴见|伴有|伴|并见|且|又|常|"
                   r"近来|近日来|近日)")
_NOISE = re.compile(r"\d|某|以来|[年月]余")  # durations, counts and names: not findings
# a clause that asks the question, or supposes its answer ("若属肺气虚证")
_ASKS = re.compile(r"何|哪|什么|是否|应诊|辨证|治疗|宜用|选用|^若|^如果|^假如|^如属")
_TONGUE = [(re.compile(r"^舌质"), "舌"), (re.compile(r"^舌苔"), "苔"), (re.compile(r"^脉象"), "脉")]
_CASE_CUE = re.compile(r"舌|脉|患者|患儿|某[男女]|\d+岁")
_FORMULA = re.compile(r"(?:汤|散|丸|饮|丹|膏|煎|方)(?:加减|合.{1,12})?$")

# question wording -> what it asks; first match wins (ours, read off the dev split's stems)
ASPECT_CUES: tuple[tuple[str, str], ...] = (
    ("finding", r"症状|表现|体征|舌象|脉象"),
    ("formula", r"方剂|方药|选方|主方|代表方|用方|方宜|首选方"),
    ("syndrome", r"证型|辨证|证属|证候|辨为|何证|属何证|病机|此证|该证"),
    ("therapy", r"治法|立法|治则|治宜|治以|治当|法宜|治疗原则"),
    ("acupoint", r"穴|针刺|艾灸|刺法"),
    ("herb", r"药物|何药|哪味|用药|配伍|药组|中药"),
    ("disease", r"诊断|诊为|病名|考虑为|何病|疾病"),
)
PATH_ASPECTS = ("syndrome", "disease", "therapy", "formula")
# a path triple's relation names its tail's kind: findings "indicate" the first node, then
# syndrome -> disease -> therapy -> formula as far as the case goes
PATH_RELATIONS = {"disease": "of_disease", "therapy": "treated_by", "formula": "prescribes"}
TAIL_ASPECT = {**{f"indicates_{a}": a for a in PATH_ASPECTS}, **{v: k for k, v in PATH_RELATIONS.items()}}
FINDING_RELATIONS = tuple(f"indicates_{a}" for a in PATH_ASPECTS) + ("finding_of",)


def findings(text: str) -> list[str]:
    """The findings of a case description: its clauses (2-16 characters, with a Chinese
    character), without demographics, the sentence that asks the question, or lead-in words;
    [] when the text does not read as a case (no tongue, pulse or patient)."""
    if not _CASE_CUE.search(text):
        return []
    out: list[str] = []
    for sentence in _SENTENCE.split(text):
        if sentence.rstrip().endswith(("？", "?")):
            continue
        for clause in _CLAUSE.split(_BLANK.sub("（）", sentence)):
            c = _LEAD.sub("", clause.strip(" .．"))
            if not c or c.endswith(("是", "为")):  # "其证型为（ ）": the question, not a finding
                continue
            for pat, repl in _TONGUE:
                c = pat.sub(repl, c)
            # "舌红苔少脉细数": tongue body, coating and pulse are three findings
            parts = [x for x in re.split(r"(?<=.)(?=苔|脉)", c) if x] if c.startswith(("舌", "苔")) else [c]
            for x in parts:
                if (2 <= len(x) <= 16 and _HAN.search(x) and not _DEMOGRAPHIC.match(x) and not _ASKS.search(x)
                        and not _NOISE.search(x) and x not in out):
                    out.append(x)
    return out if len(out) >= 2 else []


def aspect(stem: str, answer: str = "") -> str:
    """What a question asks: one of ASPECT_CUES' names, or "other"."""
    for name, cue in ASPECT_CUES:
        if re.search(cue, stem):
            # "治疗应首选（ ）" answered with a formula asks for the formula
            if name in ("finding", "therapy", "herb") and _FORMULA.search(answer):
                return "formula"
            return name
    if _FORMULA.search(answer) and re.search(r"治疗|首选|选用", stem):
        return "formula"
    return "other"


def bigrams(text: str) -> frozenset[str]:
    s = "".join(ch for ch in text if ch.isalnum())
    return frozenset(s[i:i + 2] for i in range(len(s) - 1)) if len(s) > 1 else frozenset([s] if s else [])


def containment(a: str, b: str) -> float:
    """Shared character bigrams over the smaller set's size (1.0 when one finding holds the other)."""
    x, y = bigrams(a), bigrams(b)
    return len(x & y) / min(len(x), len(y)) if x and y else 0.0


_NEGATION = re.compile(r"[不无未非没]")


def similarity(a: str, b: str) -> float:
    """How far two findings say the same: bigram containment, or 0.8 when every character of the
    shorter one appears in order in the longer ("耳鸣" in "耳暴鸣", "头痛" in "头身疼痛"), unless
    only the longer one is negated ("口渴" is not "口不渴").

    >>> similarity("耳鸣", "耳暴鸣"), similarity("口渴", "口不渴"), similarity("耳鸣", "耳鸣如潮")
    (0.8, 0.0, 1.0)
    """
    c = containment(a, b)
    short, long_ = sorted((a, b), key=len)
    if c >= 0.8 or len(short) < 2 or bool(_NEGATION.search(short)) != bool(_NEGATION.search(long_)):
        return c
    it = iter(long_)
    return 0.8 if all(ch in it for ch in short) else c


def case_path(stems_answers: list[tuple[str, str]], case_findings: list[str]) -> list[dict[str, str]]:
    """A solved case's triples: findings ``indicates_<kind>`` the first path node (syndrome, else disease,
    else therapy, else formula), path nodes linked in order, other questions as (question, aspect,
    answer). ``stems_answers``: each question's stem and answer text."""
    nodes: dict[str, str] = {}
    other: list[dict[str, str]] = []
    for stem, ans in stems_answers:
        a = aspect(stem, ans)
        if a in PATH_ASPECTS and a not in nodes:
            nodes[a] = ans
        else:
            other.append({"head": _BLANK.sub("", stem).strip("。 ")[:60], "relation": a, "tail": ans})
    path = [(a, nodes[a]) for a in PATH_ASPECTS if a in nodes]
    triples: list[dict[str, str]] = []
    if path:
        first_aspect, first = path[0]
        triples += [{"head": f, "relation": f"indicates_{first_aspect}", "tail": first} for f in case_findings]
        for (_, n0), (a1, n1) in zip(path, path[1:]):
            triples.append({"head": n0, "relation": PATH_RELATIONS[a1], "tail": n1})
    elif case_findings:
        triples += [{"head": f, "relation": "finding_of", "tail": "本例"} for f in case_findings]
    return triples + other


def strip_suffix(term: str) -> str:
    """A term without its kind suffix ("证", "法"): the way exam options often write it."""
    return re.sub(r"(?:证|法|病)$", "", term.strip()) if len(term.strip()) > 2 else term.strip()


_FEATURES = re.compile(r"(?:临床)?以(.+?)(?:等)?为(?:主要|常见|基本)?(?:特征|主症|表现)")


@dataclass
class TermEntry:
    term: str
    part: str  # Disease, Syndrome, Therapy
    passage_id: str
    doc_id: str
    text: str

    @property
    def features(self) -> list[str]:
        """The clinical features a definition lists ("临床以A，B，舌红，脉弦数等为特征的证候"):
        the general graph's finding -> syndrome edges."""
        m = _FEATURES.search(self.text)
        if not m:
            return []
        out = []
        for clause in _CLAUSE.split(m.group(1)):
            c = re.sub(r"^(?:或|甚或|甚则|可伴见|伴见|兼见)", "", clause.strip())
            for pat, repl in _TONGUE:
                c = pat.sub(repl, c)
            if len(c) >= 2 and c not in out:
                out.append(c)
        return out


def definition_match(question_findings: list[str], entry: TermEntry,
                     min_sim: float = 0.6) -> list[tuple[str, str]]:
    """The question's findings that a definition's features contain (finding, feature): a path
    finding -> term in the general graph.

    >>> e = TermEntry("肝火上炎证", "Syndrome", "p", "d", "……临床以头痛，面赤，耳暴鸣，舌质红，脉弦数等为特征的证候。")
    >>> definition_match(["耳鸣", "舌红", "便溏"], e)
    [('耳鸣', '耳暴鸣'), ('舌红', '舌红')]
    """
    feats = entry.features
    out = []
    for f in question_findings:
        best = max(feats, key=lambda g: similarity(f, g), default="")
        if best and similarity(f, best) >= min_sim:
            out.append((f, best))
    return out


class TermIndex:
    """GB/T 16751 terms (and their alternatives) -> their definition passage, from the passages
    of an index that ingested the standard (doc ids ``gbt16751:<part>:<code>``)."""

    def __init__(self, rows: Iterable[dict[str, Any]]):
        self.by_key: dict[str, TermEntry] = {}
        for r in rows:
            part = r["doc_id"].split(":")[1] if r["doc_id"].count(":") >= 2 else ""
            e = TermEntry(r["title"], part, r["passage_id"], r["doc_id"], r["text"])
            m = re.search(r"又称：([^）]*)）", r["text"])
            for name in [r["title"]] + (m.group(1).split("、") if m else []):
                for key in {name, strip_suffix(name)}:
                    if len(key) >= 2:
                        self.by_key.setdefault(key, e)

    def __len__(self) -> int:
        return len(self.by_key)

    @classmethod
    def of_store(cls, store) -> "TermIndex":
        """The GB/T 16751 entries an index's passage store holds (none: an empty index)."""
        return cls(store.passages(store.rowids_of_docs("gbt16751:")).values())

    def lookup(self, name: str) -> Optional[TermEntry]:
        """The entry a name denotes: exactly, or without its suffix ("肝火上炎" -> 肝火上炎证)."""
        n = name.strip()
        return self.by_key.get(n) or self.by_key.get(strip_suffix(n))

    def mentioned(self, text: str, min_chars: int = 3) -> list[TermEntry]:
        """Entries whose name appears in ``text`` ("若属肝火上炎证，……"), longest names first, a name
        inside a longer one found in the same place left out."""
        found: list[tuple[int, int, TermEntry]] = []
        for key, e in self.by_key.items():
            if len(key) >= min_chars and key in text and key.endswith(("证", "病", "法", "症")):
                start = text.index(key)
                found.append((start, start + len(key), e))
        found.sort(key=lambda x: -(x[1] - x[0]))
        kept: list[tuple[int, int, TermEntry]] = []
        for s, t, e in found:
            if not any(s >= a and t <= b for a, b, _ in kept) and all(e is not k for _, _, k in kept):
                kept.append((s, t, e))
        return [e for _, _, e in sorted(kept, key=lambda x: x[0])]

    def lookup_all(self, name: str) -> list[TermEntry]:
        """The entries a name denotes: the whole name, else each of its comma-separated parts
        ("消食导滞，通里攻下": two therapies)."""
        whole = self.lookup(name)
        if whole is not None:
            return [whole]
        out = []
        for part in re.split(r"[，,、；;\s之]", name):
            e = self.lookup(part) if part.strip() else None
            if e is not None and e not in out:
                out.append(e)
        return out


@dataclass
class Case:
    case_id: str
    question: str
    answer: str
    reasoning: str
    findings: list[str] = field(default_factory=list)
    path: list[dict[str, Any]] = field(default_factory=list)

    def nodes(self) -> dict[str, str]:
        """The path's syndrome, disease, therapy and formula (those the case has)."""
        out: dict[str, str] = {}
        for t in self.path:
            a = TAIL_ASPECT.get(t["relation"])
            if a:
                out.setdefault(a, t["tail"])
        return out


class CaseMatcher:
    """Solved cases ranked for a question: ``finding_weight`` x the IDF-weighted share of the
    question's findings that a case's findings contain (bigram containment >= ``min_sim``) plus
    the rest x the character-bigram cosine of the texts; texts alone when either side has no
    findings (a knowledge question)."""

    def __init__(self, cases: list[Case], finding_weight: float = 0.6, min_sim: float = 0.6):
        self.cases, self.finding_weight, self.min_sim = cases, finding_weight, min_sim
        df: dict[str, int] = {}
        for c in cases:
            for g in set().union(*[bigrams(f) for f in c.findings]) if c.findings else ():
                df[g] = df.get(g, 0) + 1
        self._df, self._n = df, max(len(cases), 1)
        self._vecs = [self._vector(c.question) for c in cases]

    def _idf(self, gram: str) -> float:
        return math.log((self._n + 1) / (self._df.get(gram, 0) + 1)) + 1.0

    def _vector(self, text: str) -> dict[str, float]:
        counts: dict[str, float] = {}
        s = "".join(ch for ch in text if ch.isalnum())
        for i in range(len(s) - 1):
            counts[s[i:i + 2]] = counts.get(s[i:i + 2], 0.0) + 1.0
        norm = math.sqrt(sum(v * v for v in counts.values())) or 1.0
        return {k: v / norm for k, v in counts.items()}

    def finding_score(self, qf: list[str], cf: list[str]) -> tuple[float, list[tuple[str, str, float]]]:
        """IDF-weighted share of the question's findings matched, and the matched pairs."""
        total = got = 0.0
        pairs = []
        for f in qf:
            w = max((self._idf(g) for g in bigrams(f)), default=1.0)
            total += w
            best, sim = max(((g, similarity(f, g)) for g in cf), key=lambda x: x[1], default=("", 0.0))
            if sim >= self.min_sim:
                got += w * sim
                pairs.append((f, best, round(sim, 3)))
        return (got / total if total else 0.0), pairs

    def match(self, question: str, k: int = 3, exclude: frozenset[str] = frozenset(),
              question_findings: Optional[list[str]] = None) -> list[dict[str, Any]]:
        """The ``k`` best cases (``question_findings``: the question's findings when the caller
        has them already)."""
        qf = findings(question) if question_findings is None else question_findings
        qv = self._vector(question)
        scored = []
        for c, cv in zip(self.cases, self._vecs):
            if c.case_id in exclude:
                continue
            text = sum(v * cv.get(g, 0.0) for g, v in qv.items())
            if qf and c.findings:
                fs, pairs = self.finding_score(qf, c.findings)
                score = self.finding_weight * fs + (1 - self.finding_weight) * text
            else:
                fs, pairs, score = 0.0, [], text
            scored.append((score, c, fs, pairs, text))
        scored.sort(key=lambda x: -x[0])
        return [{"case_id": c.case_id, "score": round(s, 4), "finding_score": round(fs, 4),
                 "text_score": round(t, 4), "matched": [{"finding": a, "case_finding": b, "sim": sim}
                                                        for a, b, sim in pairs],
                 "question": c.question, "answer": c.answer, "reasoning": c.reasoning, "nodes": c.nodes(),
                 "path": c.path} for s, c, fs, pairs, t in scored[:k]]


def cases_from_kg(kg) -> list[Case]:
    """The TCM cases stored in a knowledge graph (``medr2 kg cases --format tcmbench``)."""
    paths: dict[str, list[dict[str, Any]]] = {}
    for r in kg.case_triples():
        paths.setdefault(r["case_id"], []).append(r)
    out = []
    for c in kg.cases():
        path = [{k: t[k] for k in ("head", "relation", "tail", "tail_id")} for t in paths.get(c["case_id"], [])]
        out.append(Case(c["case_id"], c["question"], c["answer"], c["reasoning"],
                        [t["head"] for t in path if t["relation"] in FINDING_RELATIONS], path))
    return out


def tcm_case(items: list, terms: Optional[TermIndex] = None) -> tuple[dict[str, Any], list[dict[str, Any]],
                                                                      list[tuple[str, float]]]:
    """One TCMBench group (medr2.ingest.loaders.tcmbench.TCMItem: a case vignette with its
    sub-questions, or one question) as a solved case for :meth:`KGStore.put_case`: the case
    record, its path triples (a node linked to its GB/T 16751 entry carries the entry's doc id),
    and the definition passages of the linked nodes as its support."""
    first = items[0]
    text = first.context or first.stem
    case_findings = findings(first.context) if first.context else findings(first.stem)
    triples = case_path([(it.stem, it.answer_text) for it in items], case_findings)
    support: dict[str, float] = {}
    for t in triples:
        hits = terms.lookup_all(t["tail"]) if terms is not None and t["relation"] in TAIL_ASPECT else []
        if hits:
            t["tail_id"] = hits[0].doc_id
        for h in hits:
            support[h.passage_id] = 1.0
    question = "\n".join([first.context] * bool(first.context) + [it.stem for it in items])
    case = {"case_id": f"tcmbench:{first.group}", "question": question or text,
            "answer": "；".join(it.answer_text for it in items),
            "reasoning": "\n".join(it.analysis for it in items if it.analysis), "source": f"tcmbench-{first.kind}",
            "method": "tcm-rules"}
    return case, triples, sorted(support.items())


def option_scores(options: dict[str, str], definitions: list[dict[str, Any]], cases: list[dict[str, Any]],
                  n_findings: int, min_sim: float = 0.8) -> dict[str, dict[str, Any]]:
    """Each option's support in the two graphs, the deterministic answer of TCM-DiffRAG without a
    model: the share of the case's findings its GB/T definition lists (general graph) plus, for
    each matched solved case whose path or answers name it, that case's match score (personalized
    graph). Returns {letter: {score, definition, cases}}.

    >>> s = option_scores({"A": "肝火上炎证", "B": "脾气虚证"}, [{"option": "A", "pairs": [["头痛", "头痛"]]}],
    ...                   [{"case_id": "c1", "score": 0.5, "nodes": {"syndrome": "肝火上炎证"}, "answer": ""}], 2)
    >>> s["A"]["score"], s["A"]["cases"], s["B"]["score"]
    (1.0, ['c1'], 0.0)
    """
    out = {k: {"score": 0.0, "definition": 0.0, "cases": []} for k in options}
    for d in definitions:
        if d["option"] in out and n_findings:
            out[d["option"]]["definition"] = round(len(d["pairs"]) / n_findings, 4)
            out[d["option"]]["score"] += len(d["pairs"]) / n_findings
    for c in cases:
        named = list(c.get("nodes", {}).values()) + [x for x in re.split(r"[；;]", c.get("answer", "")) if x]
        for k, text in options.items():
            if any(similarity(strip_suffix(text), strip_suffix(n)) >= min_sim for n in named if n):
                out[k]["score"] += c["score"]
                out[k]["cases"].append(c["case_id"])
    for v in out.values():
        v["score"] = round(v["score"], 4)
    return out
