"""Triple extractors: deterministic rules, the structured reader of guideline summaries, the LLM."""

from functools import lru_cache


@lru_cache(maxsize=1)
def extractor_relations() -> dict[str, frozenset[str]]:
    """The relations each of medr2's extractors can produce, by extractor name (one list: an
    extractor missing here is assumed to produce any relation)."""
    from medr2.kg.extract.llm import LLMExtractor
    from medr2.kg.extract.rules import RuleExtractor
    from medr2.kg.extract.structured import StructuredExtractor

    return {x.name: x.relations for x in (RuleExtractor, StructuredExtractor, LLMExtractor)}


def can_produce(extractor: str, relation: str) -> bool:
    """Whether an extractor can produce the relation at all (its ``relations``), so that its
    silence counts against a triple's agreement; an extractor medr2 does not know is assumed to.

    >>> can_produce("rules", "considered_for"), can_produce("structured", "considered_for")
    (False, True)
    """
    rels = extractor_relations().get(extractor)
    return rels is None or relation in rels
