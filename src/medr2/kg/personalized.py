"""TCM-DiffRAG's personalized graph: reasoning over solved cases, kept as triple chains mapped to
the reasoning text they came from, and matched at query time.

For each solved case (question, answer, explanation):

1. decompose the solution into a reasoning triple chain: the LLM (JSON schema), or the
   deterministic extractor on the explanation (and, failing that, on question + answer);
2. align each triple to the general graph by embedding similarity (the index's dense encoder
   on "head relation tail" strings) and recall the passages the aligned triples come from;
3. keep the reasoning: the case's own explanation, or (with an LLM and no explanation) one
   written by the LLM from the question, answer and recalled passages;
4. store every personalized triple with its case, so a triple maps back to its reasoning text.

At query time :func:`match_cases` decomposes the question into a triple path (LLM, or the
deterministic extractor plus linked entities) and returns the cases whose triples match best,
with their reasoning texts. :func:`export_reasoning` writes the supervision
(question -> reasoning, question -> triple chain) as ShareGPT / Alpaca JSON for LLaMA-Factory.

Example::

    >>> from medr2.kg.personalized import triple_text, load_cases
    >>> triple_text({"head": "metformin", "relation": "treats", "tail": "type 2 diabetes"})
    'metformin treats type 2 diabetes'
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import numpy as np

from medr2.kg.extract.rules import RuleExtractor
from medr2.kg.prompts import decompose_messages, reasoning_messages
from medr2.kg.relations import RELATIONS
from medr2.kg.store import KGStore
from medr2.llm.base import LLM, LLMError, stage, structured

CHAIN_SCHEMA = {
    "type": "object",
    "properties": {"triples": {"type": "array", "minItems": 1, "maxItems": 6, "items": {
        "type": "object",
        "properties": {"head": {"type": "string", "minLength": 1, "maxLength": 100},
                       "relation": {"type": "string", "minLength": 2, "maxLength": 40},
                       "tail": {"type": "string", "minLength": 1, "maxLength": 100}},
        "required": ["head", "relation", "tail"]}}},
    "required": ["triples"],
}


def triple_text(t: dict[str, Any]) -> str:
    return f"{t['head']} {t['relation'].replace('_', ' ')} {t['tail']}"


def load_cases(path: str | Path, fmt: str = "auto", limit: Optional[int] = None) -> Iterator[dict[str, Any]]:
    """Solved cases from JSON Lines: ``{id, question, answer, explanation}``, or MedMCQA
    (``{id, question, opa..opd, cop, exp}``: cases only where ``exp`` is present), or MedQA
    (``{question, options, answer, answer_idx}`` with an ``explanation`` field)."""
    from medr2.ingest.loaders.records import strict_jsonl

    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"case file {p} does not exist")
    n = 0
    for i, (_, rec) in enumerate(strict_jsonl(p, ValueError)):
        if not isinstance(rec, dict):
            raise ValueError(f"{p}: record {i + 1} is not a JSON object")
        case = _case(rec, i, fmt)
        if case is None:
            continue
        yield case
        n += 1
        if limit and n >= limit:
            return


def _case(rec: dict[str, Any], i: int, fmt: str) -> Optional[dict[str, Any]]:
    if fmt in ("auto", "medmcqa") and "opa" in rec:
        exp = (rec.get("exp") or "").strip()
        if not exp:
            return None
        letters = ["opa", "opb", "opc", "opd"]
        cop = rec.get("cop")
        idx = int(cop) - 1 if isinstance(cop, int) or str(cop).isdigit() else "abcd".index(str(cop).lower()[0])
        idx = idx if 0 <= idx < 4 else 0
        return {"case_id": f"medmcqa:{rec.get('id', i)}", "question": rec["question"], "answer": rec[letters[idx]],
                "explanation": exp, "source": "medmcqa"}
    q = rec.get("question")
    if not q:
        raise ValueError(f"record {i + 1}: no 'question'")
    ans = rec.get("answer", "")
    if isinstance(rec.get("options"), dict) and isinstance(ans, str) and ans in rec["options"]:
        ans = rec["options"][ans]
    return {"case_id": str(rec.get("id", rec.get("case_id", f"case:{i}"))), "question": q, "answer": str(ans),
            "explanation": (rec.get("explanation") or rec.get("exp") or rec.get("reasoning") or "").strip(),
            "source": rec.get("source", "jsonl")}


class CaseGraphBuilder:
    def __init__(self, kg: KGStore, rules: RuleExtractor, encoder=None, llm: Optional[LLM] = None,
                 align_min: float = 0.6, max_support: int = 5):
        self.kg = kg
        self.rules = rules
        self.encoder = encoder
        self.llm = llm
        self.align_min = align_min
        self.max_support = max_support
        self._graph: Optional[tuple[list[dict], np.ndarray]] = None
        self.failures = 0

    def decompose(self, question: str, answer: str, explanation: str) -> tuple[list[dict[str, Any]], str]:
        if self.llm is not None:
            with stage("kg_decompose"):
                try:
                    got = structured(self.llm, decompose_messages(
                        f"{question}\nAnswer: {answer}\nExplanation: {explanation[:1500]}", sorted(RELATIONS)),
                        CHAIN_SCHEMA, max_tokens=300)
                    return got["triples"], "llm"
                except LLMError:
                    self.failures += 1
        for text in (explanation, f"{question} {answer}"):
            cands = self.rules.passage_triples(text) if text else []
            if cands:
                return [{"head": c.head, "relation": c.relation, "tail": c.tail, "head_id": c.head_id,
                         "tail_id": c.tail_id} for c in cands[:6]], "rules"
        # no relation cue: link the question's entities to the answer's (an "associated" chain)
        qm = self.rules.library.mentions(question)
        am = self.rules.library.mentions(answer)
        chain = [{"head": a.surface, "relation": "related_to", "tail": b.surface, "head_id": a.entity_id,
                  "tail_id": b.entity_id} for a in qm[:3] for b in am[:1] if a.entity_id != b.entity_id]
        return chain, "entities"

    def graph_vectors(self) -> tuple[list[dict], np.ndarray]:
        if self._graph is None:
            rows = [dict(zip(["triple_id", "head", "relation", "tail", "q"], r)) for r in self.kg.db.execute(
                "SELECT t.triple_id, h.name, t.relation, tl.name, t.q FROM triples t JOIN entities h ON "
                "h.entity_id=t.head_id JOIN entities tl ON tl.entity_id=t.tail_id")]
            vecs = (np.asarray(self.encoder.encode_passages([triple_text(r) for r in rows]), dtype=np.float32)
                    if rows and self.encoder is not None else np.zeros((0, 1), dtype=np.float32))
            self._graph = (rows, vecs)
        return self._graph

    def align(self, chain: list[dict[str, Any]]) -> list[tuple[str, float]]:
        """Align each chain triple to its most similar graph triple; return supporting TextIDs."""
        rows, vecs = self.graph_vectors()
        if not rows or not chain or self.encoder is None:
            return []
        q = np.asarray(self.encoder.encode_passages([triple_text(t) for t in chain]), dtype=np.float32)
        sims = q @ vecs.T
        support: dict[str, float] = {}
        for i, t in enumerate(chain):
            j = int(np.argmax(sims[i]))
            s = float(sims[i, j])
            if s >= self.align_min:
                t["aligned_triple"], t["align_score"] = rows[j]["triple_id"], round(s, 4)
                for tid in self.kg.text_ids(rows[j]["triple_id"]):
                    support[tid] = max(support.get(tid, 0.0), s)
        return sorted(support.items(), key=lambda kv: -kv[1])[: self.max_support]

    def add_case(self, case: dict[str, Any], passage_text: Optional[Callable[[str], str]] = None) -> dict[str, Any]:
        chain, method = self.decompose(case["question"], case["answer"], case["explanation"])
        support = self.align(chain)
        reasoning = case["explanation"]
        if not reasoning and self.llm is not None:
            texts = [passage_text(t) for t, _ in support] if passage_text else []
            with stage("kg_reasoning"):
                try:
                    out = self.llm.chat(reasoning_messages(case["question"], case["answer"], texts), max_tokens=400,
                                        temperature=0.0, seed=0)
                    reasoning = out["text"].strip()
                    method += "+llm_reasoning"
                except LLMError:
                    self.failures += 1
        with self.kg.transaction():
            self.kg.put_case({**case, "reasoning": reasoning, "method": method}, chain, support)
        return {"case_id": case["case_id"], "triples": len(chain), "support": len(support), "method": method}


def match_cases(kg: KGStore, encoder, question: str, rules: RuleExtractor, llm: Optional[LLM] = None,
                k: int = 3, min_score: float = 0.5) -> dict[str, Any]:
    """Decompose the question into a triple path and return the best-matching cases' reasoning."""
    path: list[dict[str, Any]] = []
    method = "rules"
    if llm is not None:
        try:
            path = structured(llm, decompose_messages(question, sorted(RELATIONS)), CHAIN_SCHEMA,
                              max_tokens=200)["triples"]
            method = "llm"
        except LLMError:
            path = []
    if not path:
        path = [{"head": c.head, "relation": c.relation, "tail": c.tail} for c in rules.passage_triples(question)]
    queries = [triple_text(t) for t in path] or [question]
    rows = kg.case_triples()
    if not rows or encoder is None:
        return {"path": path, "method": method, "cases": []}
    vecs = np.asarray(encoder.encode_passages([triple_text(r) for r in rows]), dtype=np.float32)
    q = np.asarray(encoder.encode_passages(queries), dtype=np.float32)
    sims = q @ vecs.T
    best: dict[str, tuple[float, list[dict]]] = {}
    for i in range(sims.shape[0]):
        for j in np.argsort(-sims[i])[: 20]:
            s = float(sims[i, j])
            if s < min_score:
                break
            cid = rows[j]["case_id"]
            score, matched = best.get(cid, (0.0, []))
            matched.append({k2: rows[j][k2] for k2 in ("head", "relation", "tail")} | {"score": round(s, 4)})
            best[cid] = (score + s, matched)
    ranked = sorted(best.items(), key=lambda kv: -kv[1][0])[:k]
    cases = []
    for cid, (score, matched) in ranked:
        c = kg.case(cid)
        cases.append({"case_id": cid, "score": round(score, 4), "question": c["question"], "answer": c["answer"],
                      "reasoning": c["reasoning"], "matched": matched[:6], "support": c["support"]})
    return {"path": path, "method": method, "cases": cases}


def export_reasoning(kg: KGStore, out: str | Path, fmt: str = "sharegpt") -> int:
    """Reasoning supervision for fine-tuning: per case one record question -> reasoning and one
    question -> triple chain (LLaMA-Factory ShareGPT ``conversations`` or Alpaca
    ``instruction/input/output``)."""
    if fmt not in ("sharegpt", "alpaca"):
        raise ValueError(f"unknown format {fmt!r}; use sharegpt or alpaca")
    chains: dict[str, list[dict]] = {}
    for r in kg.case_triples():
        chains.setdefault(r["case_id"], []).append(r)
    recs = []
    for c in kg.cases():
        chain = json.dumps([{k: t[k] for k in ("head", "relation", "tail")} for t in chains.get(c["case_id"], [])],
                           ensure_ascii=False)
        pairs = []
        if c["reasoning"]:
            pairs.append(("Reason step by step to the answer of this clinical question.\n" + c["question"],
                          f"{c['reasoning']}\nAnswer: {c['answer']}"))
        if chains.get(c["case_id"]):
            pairs.append(("Decompose this clinical question into the chain of knowledge triples "
                          "(head, relation, tail) that leads to its answer.\n" + c["question"], chain))
        for prompt, target in pairs:
            if fmt == "sharegpt":
                recs.append({"conversations": [{"from": "human", "value": prompt}, {"from": "gpt", "value": target}],
                             "id": c["case_id"]})
            else:
                recs.append({"instruction": prompt, "input": "", "output": target, "id": c["case_id"]})
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(recs, ensure_ascii=False, indent=1), encoding="utf-8")
    return len(recs)
