"""LLM extractor: JSON-schema output (entity types, relations from the schema, the passage's
TextID), through any backend of the LLM layer; calls go through the LLM cache, so a rebuild
repeats no call.

Example::

    >>> from medr2.kg.extract.llm import triple_schema
    >>> s = triple_schema("p1")
    >>> s["properties"]["triples"]["items"]["properties"]["text_id"]["enum"]
    ['p1']
"""

from __future__ import annotations

from typing import Any

from medr2.kg.extract.base import Candidate
from medr2.kg.prompts import extract_messages
from medr2.kg.relations import ENTITY_TYPES, RELATIONS
from medr2.llm.base import LLM, LLMError, stage, structured
from medr2.schema import Document, Passage

_ASKED = {r.name: r.description for r in RELATIONS.values()
          if r.polarity > 0 and r.name not in ("considered_for", "in_population", "outcome_considered")}


def triple_schema(text_id: str, max_triples: int = 12) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"triples": {"type": "array", "maxItems": max_triples, "items": {
            "type": "object",
            "properties": {
                "head": {"type": "string", "minLength": 1, "maxLength": 120},
                "head_type": {"type": "string", "enum": ENTITY_TYPES},
                # free text: the normaliser maps surfaces to the schema (exact, synonym, suggestion, fuzzy)
                "relation": {"type": "string", "minLength": 2, "maxLength": 40},
                "negated": {"type": "boolean"},
                "tail": {"type": "string", "minLength": 1, "maxLength": 120},
                "tail_type": {"type": "string", "enum": ENTITY_TYPES},
                "text_id": {"type": "string", "enum": [text_id]},
            },
            "required": ["head", "head_type", "relation", "negated", "tail", "tail_type", "text_id"],
        }}},
        "required": ["triples"],
    }


class LLMExtractor:
    name = "llm"
    # the relations it is asked for and their negations (extractor agreement counts its silence on
    # these only; its free relation text may map to another relation now and then)
    relations = frozenset(set(_ASKED) | {"not_" + r for r in _ASKED})

    def __init__(self, llm: LLM, max_triples: int = 12, max_tokens: int = 700):
        if llm is None:
            raise LLMError("the llm extractor needs a generator (--llm); use --extractor rules|structured without one")
        self.llm = llm
        self.max_triples = max_triples
        self.max_tokens = max_tokens
        self.failures = 0

    def applies(self, doc: Document) -> bool:
        return True

    def extract(self, doc: Document, passages: list[Passage]) -> list[Candidate]:
        out: list[Candidate] = []
        for p in passages:
            with stage("kg_extract"):
                try:
                    value = structured(self.llm, extract_messages(p.text, p.passage_id, _ASKED, ENTITY_TYPES),
                                       triple_schema(p.passage_id, self.max_triples), max_tokens=self.max_tokens)
                except LLMError:
                    self.failures += 1
                    continue
            for t in value["triples"]:
                rel = ("not " if t["negated"] else "") + t["relation"]
                out.append(Candidate(t["head"], rel, t["tail"], p.passage_id, doc.doc_id, self.name,
                                     head_type=t["head_type"], tail_type=t["tail_type"]))
        return out
