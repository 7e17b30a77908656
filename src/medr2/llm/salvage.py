"""A looping chain of thought, cut where the loop began and its JSON reply continued from there.

A greedy small model sometimes writes a sound first pass through the evidence in its rationale
and then starts over, sentence for sentence, until it is stopped (:mod:`medr2.llm.repetition`).
Asking again without a chain of thought throws the sound part away and prefills the whole
prompt again. Instead the reply is cut before the first repeated sentence, the rationale string
is closed, the next field opened, and the model continues from there: the prompt and the kept
tokens are still in its context, so only the few answer tokens are decoded
(``continue_reply``, which the llama.cpp backend has; other backends answer without a chain of
thought as before).

Example::

    >>> reply = ('{"rationale": "Metformin is stopped below an eGFR of 30 [1]. It is continued at 45 or more [2]. '
    ...          'Metformin is stopped below an eGFR of 30 [1]. It is')
    >>> cut_rationale(reply, "rationale", "answer")
    '{"rationale": "Metformin is stopped below an eGFR of 30 [1]. It is continued at 45 or more [2].", "answer": "'
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from medr2.llm.base import LLM, LLMOutputError, extract_json
from medr2.llm.repetition import loop_start

MIN_KEPT = 40  # characters of rationale worth keeping; a shorter one is answered without
_QUOTE = re.compile(r'(?<!\\)(?:\\\\)*"')


def cut_rationale(reply: str, field: str, then: Optional[str], opening: str = '"') -> Optional[str]:
    """The reply's start up to where its ``field`` string began repeating itself, that string
    closed and the field ``then`` opened with ``opening`` (``"`` a string, ``[`` an array), or the
    object closed when ``then`` is None (``field`` was the only one, as in the explanation of a
    chosen option); None when the reply does not open with ``field``, the loop is not inside it,
    or too little comes before the loop."""
    m = re.match(r'\s*\{\s*"' + re.escape(field) + r'"\s*:\s*"', reply)
    if m is None:
        return None
    body = reply[m.end():]
    cut = loop_start(body)
    if cut is None or _QUOTE.search(body[:cut]):
        return None  # no repeated sentence, or the field had ended before the loop
    kept = body[:cut].rstrip().rstrip("\\")
    if len(kept) < MIN_KEPT:
        return None
    return f'{reply[:m.end()]}{kept}", "{then}": {opening}' if then is not None else f'{reply[:m.end()]}{kept}"}}'


_OPENING = {"string": '"', "array": "["}  # how the field after the rationale opens; others open bare


def salvage_looped(llm: LLM, messages: list[dict[str, str]], schema: dict[str, Any], error: LLMOutputError,
                   field: str = "rationale", max_tokens: int = 128) -> Optional[dict[str, Any]]:
    """The schema-valid reply continued from the looping reply of ``error`` cut before its loop
    (:func:`cut_rationale`; the field after ``field`` is the schema's next property, and a
    rationale that was the last field needs no continuation), or None when that cannot be done:
    the error is not a loop, the backend cannot continue a reply, the cut does not apply, or the
    result is not valid."""
    import jsonschema

    props = schema.get("properties", {})
    names = list(props)
    if not (error.looped and error.reply and field in props):
        return None
    i = names.index(field)
    then = names[i + 1] if i + 1 < len(names) else None
    if then is not None and not hasattr(llm, "continue_reply"):
        return None
    kind = props[then].get("type") if then else None
    head = cut_rationale(error.reply, field, then, _OPENING.get(kind, "") if isinstance(kind, str) else "")
    if head is None:
        return None
    text = head
    if then is not None:
        out = llm.continue_reply(messages, head, max_tokens=max_tokens)
        if out.get("finish_reason") in ("repetition", "length"):
            return None
        text = out["text"]
    try:
        value = json.loads(extract_json(text), strict=False)
        jsonschema.validate(value, schema)
    except (json.JSONDecodeError, jsonschema.ValidationError):
        return None
    return value
