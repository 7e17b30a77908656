"""The evidence window: how many tokens the selected passages may take in the generator's
window, how a passage is counted, and which passages fill it (Med-R2: w = 4K tokens by default).

Example::

    >>> from medr2.apply.context import estimate_tokens, evidence_budget
    >>> from medr2.config import Config
    >>> cfg = Config()
    >>> cfg.apply.context_tokens = 4096
    >>> class Small:                      # a generator with a 3,072-token window
    ...     n_ctx = 3072
    >>> evidence_budget(cfg, Small())     # 3072 - 900 prompt - 400 answer
    1772
    >>> evidence_budget(cfg, None)
    4096
    >>> estimate_tokens("one two three four five six seven eight nine ten")   # 10 words * 1.3 + 24
    37
"""

from __future__ import annotations

from typing import Callable, Optional

from medr2.apply.answer import EvidenceItem
from medr2.apply.pack import pack
from medr2.config import Config
from medr2.llm.base import LLM
from medr2.schema import EvidenceRow
from medr2.util.text import count_tokens

# Without the generator's tokenizer a passage is counted as 1.3 model tokens a word-like token
# (ours: English prose measures 1.2-1.35 Qwen/Llama tokens per word), plus its header.
TOKENS_PER_WORD = 1.3
# The "[n] title (source, level)" line above each passage in the prompt (ours, measured).
EVIDENCE_HEADER_TOKENS = 24
# The floor of the evidence window, whatever the generator's window leaves (ours).
MIN_EVIDENCE_TOKENS = 128


def evidence_budget(cfg: Config, generator: Optional[LLM]) -> int:
    """apply.context_tokens, cut to what the generator's window leaves after the prompt's
    instructions and demonstrations (apply.prompt_overhead_tokens) and the answer."""
    w = cfg.apply.context_tokens
    n_ctx = getattr(generator, "n_ctx", None)
    if n_ctx:
        w = min(w, int(n_ctx) - cfg.apply.prompt_overhead_tokens - cfg.apply.max_answer_tokens)
    return max(w, MIN_EVIDENCE_TOKENS)


def estimate_tokens(text: str) -> int:
    return int(count_tokens(text) * TOKENS_PER_WORD) + EVIDENCE_HEADER_TOKENS


def token_counter(generator: Optional[LLM]) -> Callable[[str], int]:
    """Tokens one passage takes in the prompt: the generator's tokenizer when there is one."""
    if generator is None:
        return estimate_tokens
    return lambda text: int(generator.count_tokens(text)) + EVIDENCE_HEADER_TOKENS


def row_item(r: EvidenceRow, n: int, text: Optional[str] = None) -> EvidenceItem:
    """An evidence row as a reader of the context sees it: numbered ``n``, showing ``text`` (the
    row's own text when None)."""
    return EvidenceItem(n, r.passage_id, r.title, r.source_type.value, r.level, r.text if text is None else text,
                        list(r.heading_path), r.relevance)


def pack_rows(rows: list[EvidenceRow], budget: int, count: Callable[[str], int],
              focused: Optional[dict[str, tuple[str, int, int]]] = None) -> list[EvidenceItem]:
    """Fill the window with the rows in their order, number the kept ones 1..k and say on each
    row why it is in or out. A row whose reason starts with "dropped" (a conflict's losing side,
    or under the relevance floor: "dropped: not relevant ...") is never packed, not even when
    nothing else is left. When not even the best passage fits, it is given cut to the window.
    ``focused``: ``{passage_id: (text, sentences kept, sentences)}`` from the sentence focus
    (:mod:`medr2.apply.focus`); such a passage is counted and shown by its focused text."""
    focused = focused or {}

    def shown(r: EvidenceRow) -> str:
        return focused[r.passage_id][0] if r.passage_id in focused else r.text

    eligible = [r for r in rows if not r.reason.startswith("dropped")]
    chosen = set(pack([(r.passage_id, count(shown(r))) for r in eligible], budget))
    clip: dict[str, str] = {}
    if eligible and not chosen:
        top = eligible[0]
        clip[top.passage_id] = " ".join(shown(top).split()[: max(budget * 2 // 3, 32)])
        chosen = {top.passage_id}
    items, n = [], 0
    for r in rows:
        if r.passage_id in chosen:
            n += 1
            r.kept, r.n = True, n
            r.reason = "in context" + (" (cut to fit the window)" if r.passage_id in clip else "")
            if r.passage_id in focused:
                _, k, total = focused[r.passage_id]
                r.reason += f" (focused: {k} of {total} sentences)"
                r.focus = shown(r)
            items.append(row_item(r, n, clip.get(r.passage_id, shown(r))))
        elif not r.reason:
            r.kept, r.reason = False, f"outside the context window (w = {budget} tokens)"
    return items
