"""The check that lets a JSON reply be decoded without the grammar (issue 39): a reply passes only
when llama.cpp's grammar for the schema would have allowed every one of its tokens."""

from medr2.apply.answer import answer_schema
from medr2.llm.llamacpp import grammar_schema
from medr2.llm.unconstrained import grammar_would_emit

ANSWER = grammar_schema(answer_schema(3, {}, cot=True))
MC = grammar_schema(answer_schema(2, {"A": "x", "B": "y"}, cot=False))


def test_a_well_formed_cited_answer_passes():
    assert grammar_would_emit('{"rationale": "Passage [1] says so.", "answer": "Yes.", "citations": [1, 3], '
                              '"insufficient": false}', ANSWER)
    assert grammar_would_emit('{ "answer" : "B", "citations": [], "insufficient": true }\n', MC)


def test_what_the_grammar_forbids_fails():
    ok = '"answer": "Yes.", "citations": [1], "insufficient": false'
    assert not grammar_would_emit('{"rationale": "r", ' + ok + ', "extra": 1}', ANSWER)  # additionalProperties
    assert not grammar_would_emit('{' + ok + ', "rationale": "r"}', ANSWER)  # required key out of order
    assert not grammar_would_emit('{"rationale": "r", "answer": "Yes.", "citations": [4], "insufficient": false}',
                                  ANSWER)  # a passage the context does not hold
    assert not grammar_would_emit('{"answer": "C", "citations": [], "insufficient": false}', MC)  # not an option
    assert not grammar_would_emit('{"rationale": "line\none", ' + ok + '}', ANSWER)  # raw newline in a string
    assert not grammar_would_emit(' {"rationale": "r", ' + ok + '}', ANSWER)  # text before the object
    assert not grammar_would_emit('{"rationale": "r", ' + ok + '} and more', ANSWER)
    assert not grammar_would_emit('{"rationale": "r", ' + ok, ANSWER)  # cut off
    assert not grammar_would_emit('{"rationale": "r", "rationale": "s", ' + ok + '}', ANSWER)  # repeated key
    # whitespace between tokens is at most one space (llama-cpp-python's `space ::= " "?`)
    assert not grammar_would_emit('{\n  "answer": "B",\n  "citations": [],\n  "insufficient": true\n}', MC)
    assert not grammar_would_emit('{"answer":  "B", "citations": [], "insufficient": true}', MC)
    assert not grammar_would_emit('{"rationale": "bad \\q escape", ' + ok + '}', ANSWER)


def test_a_cut_off_reply_is_kept_only_when_the_grammar_would_have_started_it():
    from medr2.llm.unconstrained import grammar_would_start

    assert grammar_would_start('{"rationale": "Passage [1] says the dose is re', ANSWER)
    assert grammar_would_start('{"rationale": "r", "answer": "Yes.", "citations": [1, 2', ANSWER)
    assert grammar_would_start('{"rationale": "r \\u00e9", "answer": "Ye', ANSWER)
    assert not grammar_would_start('{"answer": "Yes.", "rationale": "r', ANSWER)  # out of order
    assert not grammar_would_start('{"rationale": "r", "answer": "Yes.", "citations": [7], "insu', ANSWER)  # [7]
    assert not grammar_would_start('{"rationale": "line\none and mo', ANSWER)  # raw newline
    assert not grammar_would_start('The answer is {"rationale": "r', ANSWER)
    assert not grammar_would_start('{\n  "rationale": "r', ANSWER)


def test_nested_objects_are_checked_in_order():
    schema = {"type": "object", "required": ["items"], "properties": {"items": {"type": "array", "items": {
        "type": "object", "required": ["a", "b"], "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}}}}
    assert grammar_would_emit('{"items": [{"a": 1, "b": 2}]}', schema)
    assert not grammar_would_emit('{"items": [{"a": 1, "b": 2}, {"b": 2, "a": 1}]}', schema)
