"""Whether an unconstrained greedy reply is what a JSON-schema grammar would have produced.

A grammar only removes tokens from the choice at each step; greedy decoding then picks the most
likely allowed token. When the model's own most likely token is allowed at every step, the
constrained reply is the unconstrained one. llama.cpp's grammar sampling costs about 27 ms a
token for the bundled 1.5B generator on 2 cores (bench/README.md, CPU speed), a third of a decode
step, so medr2 decodes without the grammar first and keeps the reply when :func:`grammar_would_emit`
holds; otherwise it decodes again under the grammar. Only prompts that show the model a JSON reply
(:func:`shows_json`: a demonstration turn) are tried this way: a model not shown the format
answers in prose (the reformulation and draft prompts), and the attempt would be wasted.

The check follows the grammar llama-cpp-python builds from a schema (``llama_grammar``): the reply
is exactly one JSON value, whitespace between its tokens is at most one space (the grammar's
``space ::= " "?``), strings hold no raw control characters and only JSON escapes, the value
validates, and object keys come in the grammar's order (required properties in schema order, then
the optional ones present, in schema order). A reply cut off at the token limit is kept, cut off,
when :func:`grammar_would_start` holds: every complete top-level value so far validates and the
keys so far are in order, so the grammar would have written the same tokens up to the limit.

Example::

    >>> from medr2.llm.unconstrained import grammar_would_emit
    >>> schema = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}},
    ...           "required": ["a", "b"]}
    >>> grammar_would_emit('{"a": "x", "b": 2}', schema), grammar_would_emit('{"b": 2, "a": "x"}', schema)
    (True, False)
    >>> grammar_would_emit('Sure: {"a": "x", "b": 2}', schema), grammar_would_emit('{"a": "x\\n", "b": 2}', schema)
    (False, False)
    >>> grammar_would_emit('{\\n  "a": "x", "b": 2}', schema), grammar_would_start('{"a": "a long rea', schema)
    (False, True)
"""

from __future__ import annotations

import json
from typing import Any, Optional


class _Object(list):
    """A JSON object read as its (key, value) pairs, in the order written."""


def _members(schema: dict[str, Any]) -> tuple[dict[str, Any], list[str], list[str]]:
    """An object schema's properties, the order the grammar writes them in (required ones in
    schema order, then the optional ones) and the required ones in that order."""
    props = schema.get("properties") or {}
    required = [k for k in props if k in set(schema.get("required") or [])]
    return props, required + [k for k in props if k not in required], required


def _valid(value: Any, schema: Any) -> bool:
    """A value read with :class:`_Object` pairs: keys in the grammar's order and the schema holds."""
    import jsonschema

    if not _in_order(value, schema):
        return False
    try:
        jsonschema.validate(_plain(value), schema)
    except jsonschema.ValidationError:
        return False
    return True


def _in_order(value: Any, schema: Any) -> bool:
    """Object keys (recursively) in the order the grammar writes them."""
    if not isinstance(schema, dict):
        return True
    if isinstance(value, _Object):
        props, order, _ = _members(schema)
        keys = [k for k, _ in value]
        known = [k for k in keys if k in props]
        if len(set(keys)) != len(keys) or known != [k for k in order if k in keys]:
            return False
        if schema.get("additionalProperties") is False and len(known) != len(keys):
            return False
        return all(_in_order(v, props.get(k, {})) for k, v in value)
    if isinstance(value, list):
        return all(_in_order(v, schema.get("items", {})) for v in value)
    return True


def _plain(value: Any) -> Any:
    """Objects back to dicts (for validation)."""
    if isinstance(value, _Object):
        return {k: _plain(v) for k, v in value}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


_ESCAPES = set('"\\/bfnrt')
_HEX = set("0123456789abcdefABCDEF")


def _lexical(text: str) -> Optional[list[tuple[str, int, int]]]:
    """None when ``text`` breaks the grammar's lexical rules; else the top-level members seen, as
    (key, value start, value end or -1 while the value is unfinished)."""
    members: list[tuple[str, int, int]] = []
    depth, i, n = 0, 0, len(text)
    in_str, str_start, key = False, 0, None
    expect_key = False
    while i < n:
        c = text[i]
        if in_str:
            if c == "\\":
                nxt = text[i + 1: i + 2]
                if nxt == "u":
                    digits = text[i + 2: i + 6]
                    if not all(d in _HEX for d in digits):
                        return None
                    i += 6
                    continue
                if nxt and nxt not in _ESCAPES:
                    return None
                i += 2
                continue
            if c == '"':
                in_str = False
                if depth == 1 and expect_key:
                    key = json.loads(text[str_start: i + 1])
            elif ord(c) < 0x20 or c == "\x7f":
                return None
            i += 1
            continue
        if c.isspace():
            if c != " " or text[i + 1: i + 2] == " ":
                return None
        elif c == '"':
            in_str, str_start = True, i
        elif c in "{[":
            depth += 1
            if depth == 1:
                expect_key = True
        elif c in "}]":
            if depth == 1 and members and members[-1][2] == -1:
                members[-1] = (members[-1][0], members[-1][1], i)
            depth -= 1
        elif c == ":" and depth == 1 and key is not None:
            members.append((key, i + 1, -1))
            key, expect_key = None, False
        elif c == "," and depth == 1:
            if members and members[-1][2] == -1:
                members[-1] = (members[-1][0], members[-1][1], i)
            expect_key = True
        i += 1
    return members


def grammar_would_start(text: str, schema: dict[str, Any]) -> bool:
    """True when ``text`` (an unconstrained greedy reply cut off at the token limit) is a start
    the schema's grammar allows: the grammar would have written the same tokens up to the limit."""
    if not text.startswith("{"):
        return False
    members = _lexical(text)
    if members is None:
        return False
    props, order, req = _members(schema)
    keys = [k for k, _, _ in members]
    if len(set(keys)) != len(keys) or any(k not in props for k in keys) or keys != [k for k in order if k in keys]:
        return False
    if keys[: len(req)] != req[: len(keys)]:  # the required members come first, none skipped
        return False
    for k, a, b in members:
        if b == -1:
            continue
        try:
            value = json.loads(text[a:b], object_pairs_hook=_Object)
        except json.JSONDecodeError:
            return False
        if not _valid(value, props[k]):
            return False
    return True


def grammar_would_emit(text: str, schema: dict[str, Any]) -> bool:
    """True when ``text`` (an unconstrained greedy reply) is one the schema's grammar allows at
    every token, so constrained greedy decoding would have produced it too."""
    body = text.rstrip()
    if not body.startswith("{") or _lexical(body) is None:
        return False
    try:
        # strict: the grammar admits no raw control characters inside strings
        value = json.loads(body, object_pairs_hook=_Object)
    except json.JSONDecodeError:
        return False
    return _valid(value, schema)


def shows_json(messages: list[dict[str, str]]) -> bool:
    """Whether the prompt demonstrates a JSON reply (an assistant turn holding a JSON object).

    >>> shows_json([{"role": "user", "content": "q"}, {"role": "assistant", "content": '{"a": 1}'},
    ...             {"role": "user", "content": "q2"}])
    True
    >>> shows_json([{"role": "system", "content": 'Reply as {"a": 1}'}, {"role": "user", "content": "q"}])
    False
    """
    return any(m.get("role") == "assistant" and str(m.get("content", "")).lstrip().startswith("{")
               for m in messages[:-1])
