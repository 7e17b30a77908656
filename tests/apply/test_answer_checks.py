"""Answer assembly as pure functions: citation checks, the answer schema, the extractive answer, packing."""

import pytest

from medr2.apply.answer import EvidenceItem, answer_schema, check_citations, extractive_answer, finish, strip_bad_marks
from medr2.apply.pack import pack
from medr2.llm.llamacpp import grammar_schema


def test_citations_outside_the_context_are_removed():
    assert check_citations([2, 2, 5, 0, 1], n=3) == ([2, 1], [5, 0])
    text, bad = strip_bad_marks("See [1] and [4].", n=2)
    assert text == "See [1] and [?]." and bad == [4]
    ev = [EvidenceItem(1, "pA", "t", "paper", 4, "x"), EvidenceItem(2, "pB", "t", "paper", 4, "y")]
    a = finish({"rationale": "Per [2] and [7].", "answer": "B", "citations": [9, 2], "insufficient": False}, ev,
               {"A": "a", "B": "b"})
    assert a.citations == ["pB"] and a.cited == [2] and "[?]" in a.rationale and not a.insufficient
    assert any("not in the context" in n for n in a.notes)
    uncited = finish({"answer": "yes", "citations": [], "insufficient": False}, ev, {})
    assert uncited.insufficient and uncited.citations == []



def test_answer_schema_admits_only_context_citations_and_option_letters():
    import jsonschema

    s = answer_schema(2, {"A": "x", "B": "y"}, cot=True)
    jsonschema.validate({"rationale": "r", "answer": "A", "citations": [1, 2], "insufficient": False}, s)
    for bad in [{"rationale": "r", "answer": "C", "citations": [1], "insufficient": False},
                {"rationale": "r", "answer": "A", "citations": [3], "insufficient": False},
                {"answer": "A", "citations": [1], "insufficient": False}]:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(bad, s)
    assert "rationale" not in answer_schema(2, {}, cot=False)["properties"]
    # llama.cpp cannot unroll string length bounds; they are dropped for its grammar only
    g = grammar_schema({"type": "object", "properties": {"q": {"type": "string", "maxLength": 600}}})
    assert g == {"type": "object", "properties": {"q": {"type": "string"}}}



def test_extractive_answer_quotes_the_best_sentence_of_top_evidence():
    ev = [EvidenceItem(1, "pA", "g", "guideline", 3, "Stop metformin when the eGFR falls below 30. Check B12."),
          EvidenceItem(2, "pB", "o", "paper", 9, "Unrelated text about pneumonia.")]
    a = extractive_answer("When should metformin be stopped?", {}, ev)
    assert a.answer.startswith("Stop metformin") and a.citations == ["pA"] and a.method == "extractive"
    mc = extractive_answer("Which drug?", {"A": "metformin", "B": "aspirin"}, ev)
    assert mc.answer == "A" and mc.citations == ["pA"]



def test_pack_fills_the_window_in_rank_order():
    assert pack([("a", 3000), ("b", 2000), ("c", 900), ("d", 300)], 4096) == ["a", "c"]
    assert pack([("a", 5000)], 4096) == []

