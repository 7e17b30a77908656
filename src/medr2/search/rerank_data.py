"""Training data for medr2's reranker: (query, gold document) pairs from public data, and hard
negatives mined from medr2's own hybrid index over those documents.

Sources read from the shared data folder (each optional; a missing file is reported, not fatal):

* PubMedQA expert set (``benchmarks/pubmedqa/ori_pqal.json``): question -> its abstract,
  **without** the 500 test questions (``test_ground_truth.json``, MIRAGE's PubMedQA*).
* PubMed abstracts (``corpora/pubmed/pubmed_abstracts_299.json``): title as a pseudo-query ->
  the abstract body.
* Mixed question/answer samples (``corpora/mixed_samples/Medical_{Book,Guideline,Paper,Wiki}_en``):
  question -> answer. The exam samples are left out (they are exam questions).
* MedQuAD (``corpora/medquad/medquad.jsonl``): question -> its answer, titled by its focus. Split
  by MedQuAD document as the EBM classifier is (:func:`medr2.formulate.train.split_of`, 20%):
  the held-out documents are never used, so benchmarks can draw their questions from them.

Users add their own pairs as JSON Lines ``{"query", "positive", "negatives"?: [...]}``.

Every example belongs to a ``train`` or ``dev`` side by a hash of its group (the document), so
near-duplicate questions about one document stay on one side.

Example::

    >>> from medr2.search.rerank_data import Example, side
    >>> ex = Example(query="Is X safe?", doc_id="q1", source="pairs", group="q1")
    >>> side(ex.group, 0.1) in ("train", "dev"), side("q1", 0.1) == side("q1", 0.1)
    (True, True)
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from medr2.formulate.train import split_of

MIXED = ("Book", "Guideline", "Paper", "Wiki")
MEDQUAD_HELD_OUT = 0.2  # the EBM classifier's held-out fraction (formulate/train.py), same split


class RerankDataError(ValueError):
    """A training file cannot be used; the message names it and what to do."""


@dataclass
class Doc:
    doc_id: str
    title: str
    text: str
    source_type: str = "other"


@dataclass
class Example:
    query: str
    doc_id: str  # the gold document
    source: str
    group: str
    negatives: list[str] = field(default_factory=list)  # doc ids given with the pair (user files)


def side(group: str, dev_fraction: float) -> str:
    h = int(hashlib.sha256(("rerank-dev:" + group).encode("utf-8")).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "dev" if h < dev_fraction else "train"


def _doc_id(source: str, key: str) -> str:
    return f"{source}-{hashlib.sha1(key.encode('utf-8')).hexdigest()[:12]}"


def pubmedqa(data: Path, docs: dict[str, Doc]) -> list[Example]:
    p, test = data / "benchmarks/pubmedqa/ori_pqal.json", data / "benchmarks/pubmedqa/test_ground_truth.json"
    if not p.is_file() or not test.is_file():
        raise FileNotFoundError(p if not p.is_file() else test)
    held = set(json.loads(test.read_text()))
    out = []
    for pmid, r in json.loads(p.read_text()).items():
        if pmid in held:
            continue
        ctx = r["CONTEXTS"] if isinstance(r["CONTEXTS"], list) else [str(r["CONTEXTS"])]
        d = f"pqa-{pmid}"
        docs[d] = Doc(d, "", "\n\n".join(ctx), "paper")
        out.append(Example(r["QUESTION"], d, "pubmedqa", pmid))
    return out


def pubmed_titles(data: Path, docs: dict[str, Doc]) -> list[Example]:
    out = []
    for s in json.loads((data / "corpora/pubmed/pubmed_abstracts_299.json").read_text()):
        title, _, body = str(s).partition("\n")
        if len(title.split()) < 4 or len(body.split()) < 30:
            continue
        d = _doc_id("pubmed", title)
        docs[d] = Doc(d, "", body.strip(), "paper")
        out.append(Example(title.strip().rstrip("."), d, "pubmed-title", d))
    return out


def mixed(data: Path, docs: dict[str, Doc]) -> list[Example]:
    out = []
    for kind in MIXED:
        p = data / f"corpora/mixed_samples/Medical_{kind}_en_sampled.json"
        for q, a in json.loads(p.read_text()):
            if not str(q).strip() or len(str(a).split()) < 10:
                continue
            d = _doc_id("mixed", q + a)
            docs[d] = Doc(d, "", str(a), "guideline" if kind == "Guideline" else "other")
            out.append(Example(str(q).strip(), d, f"mixed-{kind.lower()}", d))
    return out


def medquad(data: Path, docs: dict[str, Doc], limit: int, seed: int) -> list[Example]:
    rows, seen = [], set()
    with (data / "corpora/medquad/medquad.jsonl").open() as fh:
        for line in fh:
            r = json.loads(line)
            q, a = str(r.get("question", "")).strip(), str(r.get("answer", "")).strip()
            key = " ".join(q.lower().split())
            if not q or len(a.split()) < 10 or key in seen:
                continue
            seen.add(key)
            if split_of(str(r.get("doc_id") or r.get("focus")), MEDQUAD_HELD_OUT) == "test":
                continue  # held out for benchmarks
            rows.append(r)
    random.Random(seed).shuffle(rows)
    out = []
    for r in rows[:limit]:
        d = f"medquad-{r['qid']}"
        docs[d] = Doc(d, str(r.get("focus", "")), str(r["answer"]), "entry")
        out.append(Example(str(r["question"]).strip(), d, "medquad", str(r.get("doc_id") or r["focus"])))
    return out


def pairs_file(path: Path, docs: dict[str, Doc]) -> list[Example]:
    """User pairs: one JSON object a line with ``query`` and ``positive`` (text), optionally
    ``negatives`` (texts) and ``group``."""
    if not path.is_file():
        raise RerankDataError(f"{path} does not exist; give JSON Lines with query and positive fields")
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            r = json.loads(line)
            q, pos = str(r["query"]).strip(), str(r["positive"]).strip()
            negs = [str(x) for x in r.get("negatives", [])]
        except (ValueError, KeyError, TypeError) as e:
            raise RerankDataError(f"{path}:{n}: not a pair with query and positive ({type(e).__name__}: {e})") from None
        if not q or not pos:
            raise RerankDataError(f"{path}:{n}: empty query or positive")
        d = _doc_id("pair", pos)
        docs[d] = Doc(d, "", pos)
        neg_ids = []
        for t in negs:
            nd = _doc_id("pair", t)
            docs.setdefault(nd, Doc(nd, "", t))
            neg_ids.append(nd)
        out.append(Example(q, d, "pairs", str(r.get("group") or d), neg_ids))
    return out


def collect(data: Optional[Path], pair_files: Iterable[Path], medquad_limit: int, seed: int
            ) -> tuple[dict[str, Doc], list[Example], list[str]]:
    """Documents, examples and notes on what was read."""
    docs: dict[str, Doc] = {}
    examples: list[Example] = []
    notes: list[str] = []
    if data is not None:
        readers = {"pubmedqa": lambda: pubmedqa(data, docs), "pubmed-title": lambda: pubmed_titles(data, docs),
                   "mixed": lambda: mixed(data, docs), "medquad": lambda: medquad(data, docs, medquad_limit, seed)}
        for name, read in readers.items():
            try:
                got = read()
            except FileNotFoundError as e:
                notes.append(f"{name}: skipped, {e} is missing")
                continue
            examples.extend(got)
            notes.append(f"{name}: {len(got)} examples")
    for p in pair_files:
        got = pairs_file(Path(p), docs)
        examples.extend(got)
        notes.append(f"{p}: {len(got)} examples")
    if not examples:
        raise RerankDataError("no training examples: give --data (the shared data folder) or --pairs FILE")
    return docs, examples, notes


def write_corpus(docs: dict[str, Doc], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as fh:
        for d in sorted(docs.values(), key=lambda x: x.doc_id):
            fh.write(json.dumps({"id": d.doc_id, "title": d.title, "text": d.text, "source_type": d.source_type}) + "\n")


def mine(searcher, examples: list[Example], negatives: int, pool_k: int, seed: int, progress=None,
         max_positives: int = 4) -> list[dict]:
    """One group per example: the query, the best-ranked passage of its gold document (the
    positive; up to ``max_positives`` of its passages, best ranked first, in ``positives``),
    ``negatives`` hard negatives (passages of other documents: half the top-ranked,
    the rest drawn from the pool), and the pool with gold flags (for the dev metrics). Texts
    are what the reranker reads (title and heading path, then the passage)."""
    store = searcher.index.store
    rng = random.Random(seed)
    groups = []
    for ex in examples:
        gold_doc = "jsonl:" + ex.doc_id
        gold = [r[0] for r in store.db.execute("SELECT rowid FROM passages WHERE doc_id=? ORDER BY rowid",
                                               (gold_doc,))]
        if not gold:
            continue
        hits = searcher.pool(ex.query, pool_k)[:pool_k]
        ranked_gold = [h for h in hits if h.doc_id == gold_doc]
        seen = {h.passage_id for h in ranked_gold}
        gold_hits = ranked_gold + [h for h in searcher.hits(gold, {r: {} for r in gold}) if h.passage_id not in seen]
        positives = [h.embedding_text() for h in gold_hits][:max_positives]
        pos = positives[0]
        others = [h.embedding_text() for h in hits if h.doc_id != gold_doc]
        others = [t for t in others if t.strip() != pos.strip()]
        given = []
        for nd in ex.negatives:
            rows = [r[0] for r in store.db.execute("SELECT rowid FROM passages WHERE doc_id=? ORDER BY rowid LIMIT 1",
                                                   ("jsonl:" + nd,))]
            given += [h.embedding_text() for h in searcher.hits(rows, {r: {} for r in rows})]
        top = (negatives + 1) // 2
        negs = given[:negatives] + others[:top]
        rest = others[top:]
        negs += rng.sample(rest, min(len(rest), max(0, negatives - len(negs))))
        if len(negs) < negatives:
            continue  # too small a corpus for this many negatives
        groups.append({"query": ex.query, "positive": pos, "positives": positives, "negatives": negs[:negatives],
                       "source": ex.source, "group": ex.group, "pool": [h.embedding_text() for h in hits],
                       "pool_docs": [h.doc_id for h in hits], "pool_gold": [h.doc_id == gold_doc for h in hits],
                       "gold_total": len(gold)})
        if progress is not None:
            progress(1)
    return groups
