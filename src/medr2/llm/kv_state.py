"""llama.cpp sequence states: copy a context's KV state out, load one back, and keep recent ones
in memory.

A state holds the KV cache of exactly the tokens evaluated (``llama_state_seq_get_data`` on
sequence 0), not the logits, so it is small (SmolLM2-135M: about 23 kB a token; the bundled
Qwen: about 28 kB) and a loaded state is followed by evaluating at least one more token.
:class:`KVStates` keeps states by their exact token ids, least recently used dropped first
beyond ``max_bytes``: the usefulness scorer asks about the same passage and question again in
every round with a new reference answer, and only the reference needs evaluating then.

Example::

    >>> from medr2.llm.kv_state import KVStates
    >>> kv = KVStates(max_bytes=10)
    >>> kv.put([1, 2], b"abcdef"); kv.put([1, 3], b"ghijkl")   # the first is dropped: 12 > 10
    >>> kv.get([1, 2]) is None, kv.get([1, 3]), kv.hits
    (True, b'ghijkl', 1)
"""

from __future__ import annotations

import ctypes
from collections import OrderedDict
from typing import Any, Optional, Sequence


def save_state(llm: Any) -> bytes:
    """The KV state of ``llm``'s (a ``llama_cpp.Llama``) evaluated tokens."""
    import llama_cpp

    ctx = llm._ctx.ctx
    size = llama_cpp.llama_state_seq_get_size(ctx, 0)
    buf = (ctypes.c_uint8 * size)()
    n = llama_cpp.llama_state_seq_get_data(ctx, buf, size, 0)
    return ctypes.string_at(buf, n)


def load_state(llm: Any, ids: Sequence[int], data: bytes) -> bool:
    """Make ``ids`` the evaluated tokens of ``llm`` from their saved state. False (and an empty
    context) when this build cannot read the state: the caller evaluates them instead."""
    import llama_cpp

    llm._ctx.kv_cache_clear()
    buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
    if llama_cpp.llama_state_seq_set_data(llm._ctx.ctx, buf, len(data), 0) == len(data):
        llm.input_ids[: len(ids)] = ids
        llm.n_tokens = len(ids)
        return True
    llm._ctx.kv_cache_clear()
    llm.n_tokens = 0
    return False


class KVStates:
    """Recent states in memory, keyed by their exact token ids; ``hits`` counts the states found."""

    def __init__(self, max_bytes: int):
        self.max_bytes = int(max_bytes)
        self._states: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self._bytes = 0
        self.hits = 0

    def get(self, ids: Sequence[int]) -> Optional[bytes]:
        key = tuple(int(i) for i in ids)
        data = self._states.get(key)
        if data is not None:
            self._states.move_to_end(key)
            self.hits += 1
        return data

    def put(self, ids: Sequence[int], data: bytes) -> None:
        if len(data) > self.max_bytes:
            return
        key = tuple(int(i) for i in ids)
        old = self._states.pop(key, None)
        self._bytes += len(data) - (len(old) if old is not None else 0)
        self._states[key] = data
        while self._bytes > self.max_bytes:
            _, dropped = self._states.popitem(last=False)
            self._bytes -= len(dropped)
