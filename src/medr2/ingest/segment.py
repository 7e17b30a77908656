"""Segmentation: documents -> Med-R2 units -> passages (pure functions, no I/O).

Three rules, all configurable (:class:`medr2.config.SegmentConfig`):

* **Med-R2 units**: a document longer than ``max_unit_tokens`` (10,000) is split at its natural
  chapters (the heading tree, top level first, descending only when a chapter is itself too
  long); a leaf section that still does not fit is truncated (``unit_overflow="truncate"``, the
  paper's rule) or cut into several units (``"split"``).
* **Guideline fragments** (source type ``guideline``): Unicode NFKC, boilerplate fields dropped,
  cut at semantic boundaries (paragraphs, list items), fragments under 50 characters merged
  into a neighbour, pieces over 500 characters split at sentence boundaries.
* **Retrieval windows** (every other source type): sentences packed into passages of about
  ``passage_tokens`` tokens with ``passage_overlap_tokens`` of overlap, never across a heading.

Every passage's text is ``doc.full_text()[start:end]``.

Example::

    >>> from medr2.schema import Document, Section
    >>> from medr2.config import SegmentConfig
    >>> doc = Document(doc_id="d", sections=[Section(title="A", text="One. Two. Three.")])
    >>> [p.text for p in segment(doc, SegmentConfig(passage_tokens=4, passage_overlap_tokens=0))]
    ['One. Two.', 'Three.']
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from medr2.config import SegmentConfig
from medr2.schema import Document, Passage, Section, SourceType, text_id
from medr2.util.text import TOKEN_RE, count_tokens

_CJK = re.compile(r"[\u3400-\u9fff]")
# sentence end: Latin . ! ? followed by space (not after common abbreviations), or CJK 。！？
_SENT_LATIN = re.compile(r"(?<![A-Z][a-z]\.)(?<!\b[A-Za-z]\.)(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
_SENT_CJK = re.compile(r"(?<=[。！？])")
_BOUNDARY = re.compile(r"\n\s*\n|\n(?=\s*(?:[-*\u2022\u25cf]|\d+[.)]|[a-z][.)])\s)|\n")


def sentence_spans(text: str, start: int = 0, end: int | None = None) -> list[tuple[int, int]]:
    """Character spans of the sentences of ``text[start:end]`` (whitespace trimmed)."""
    end = len(text) if end is None else end
    cuts = [start]
    chunk = text[start:end]
    for line in re.finditer(r"\n", chunk):
        cuts.append(start + line.end())
    for m in _SENT_LATIN.finditer(chunk):
        cuts.append(start + m.end())
    if _CJK.search(chunk):
        for m in _SENT_CJK.finditer(chunk):
            cuts.append(start + m.end())
    cuts = sorted(set(c for c in cuts if start <= c <= end)) + [end]
    spans = []
    for a, b in zip(cuts, cuts[1:]):
        a2, b2 = _trim(text, a, b)
        if b2 > a2:
            spans.append((a2, b2))
    return spans


def _trim(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


# --- document preparation ----------------------------------------------------------------------

def prepare(doc: Document, cfg: SegmentConfig) -> Document:
    """Guideline preprocessing: NFKC everywhere, boilerplate sections removed. Others unchanged."""
    if doc.source_type != SourceType.guideline:
        return doc
    drop = {b.casefold() for b in cfg.guideline_boilerplate_fields}
    empty = [re.compile(v) for v in cfg.guideline_boilerplate_values]

    def clean(sec: Section) -> Section | None:
        if sec.title and unicodedata.normalize("NFKC", sec.title).strip().casefold() in drop:
            return None
        kids = [c for c in (clean(k) for k in sec.children) if c is not None]
        text = unicodedata.normalize("NFKC", sec.text)
        text = "\n".join(
            line.rstrip() for line in text.split("\n") if not any(e.fullmatch(line.strip()) for e in empty)
        ).strip()
        text = re.sub(r"\n{3,}", "\n\n", text)
        if not text and not kids:
            return None
        return sec.model_copy(update={"title": unicodedata.normalize("NFKC", sec.title), "text": text, "children": kids})

    sections = [s for s in (clean(s) for s in doc.sections) if s is not None]
    return doc.model_copy(update={"sections": sections, "title": unicodedata.normalize("NFKC", doc.title)})


# --- Med-R2 units ------------------------------------------------------------------------------

@dataclass
class Span:
    """A section holding text, located in the document's full text."""

    path: tuple[str, ...]
    section: Section
    offset: int
    tokens: int
    unit: int = 0
    keep_chars: int | None = None  # truncation point (Med-R2 unit cap)
    extra_units: list[tuple[int, int]] = field(default_factory=list)  # (char offset, unit) for split overflow


def spans_of(doc: Document) -> list[Span]:
    spans, offset = [], 0
    for path, sec in doc.walk():
        if sec.text:
            spans.append(Span(path, sec, offset, count_tokens(sec.text)))
            offset += len(sec.text) + 2
    return spans


def _char_at_token(text: str, n_tokens: int) -> int:
    for i, m in enumerate(TOKEN_RE.finditer(text)):
        if i == n_tokens:
            return m.start()
    return len(text)


def assign_units(doc: Document, spans: list[Span], cfg: SegmentConfig) -> int:
    """Set ``unit`` (and truncation) on every span; return the number of truncated sections."""
    cap = cfg.max_unit_tokens
    if sum(s.tokens for s in spans) <= cap:
        return 0
    by_section = {id(s.section): s for s in spans}
    state = {"unit": 0, "cur": 0, "truncated": 0}

    def subtree(sec: Section) -> list[Span]:
        out = [by_section[id(sec)]] if id(sec) in by_section else []
        for c in sec.children:
            out.extend(subtree(c))
        return out

    def new_unit():
        if state["cur"] > 0:
            state["unit"] += 1
            state["cur"] = 0

    def place(nodes: list[Section]) -> None:
        for node in nodes:
            members = subtree(node)
            tok = sum(s.tokens for s in members)
            if tok > cap:
                new_unit()
                own = by_section.get(id(node))
                if own is not None:
                    if own.tokens > cap:
                        _overflow(own)
                    else:
                        own.unit = state["unit"]
                        state["cur"] = own.tokens
                place(node.children)
                continue
            if state["cur"] + tok > cap:
                new_unit()
            for s in members:
                s.unit = state["unit"]
            state["cur"] += tok

    def _overflow(span: Span) -> None:
        span.unit = state["unit"]
        if cfg.unit_overflow == "truncate":
            span.keep_chars = _char_at_token(span.section.text, cap)
            state["truncated"] += 1
            state["cur"] = cap
        else:
            n = cap
            while n < span.tokens:
                state["unit"] += 1
                span.extra_units.append((_char_at_token(span.section.text, n), state["unit"]))
                n += cap
            state["cur"] = span.tokens - (n - cap)
        new_unit()

    place(doc.sections)
    return state["truncated"]


# --- passages ----------------------------------------------------------------------------------

@dataclass
class Piece:
    start: int  # absolute offsets into full text
    end: int
    path: tuple[str, ...]
    unit: int


def _unit_at(span: Span, rel: int) -> int:
    unit = span.unit
    for off, u in span.extra_units:
        if rel >= off:
            unit = u
    return unit


def window_pieces(span: Span, cfg: SegmentConfig) -> list[Piece]:
    text = span.section.text
    limit = span.keep_chars if span.keep_chars is not None else len(text)
    sents = sentence_spans(text, 0, limit)
    cuts = sorted(off for off, _ in span.extra_units)
    if cuts:  # "split" overflow: no sentence crosses a unit boundary
        split_sents = []
        for a, b in sents:
            for c in cuts:
                if a < c < b:
                    split_sents.append(_trim(text, a, c))
                    a = _trim(text, c, b)[0]
            split_sents.append((a, b))
        sents = [(a, b) for a, b in split_sents if b > a]
    # very long sentences are cut at token boundaries so no passage exceeds the budget by much
    units: list[tuple[int, int, int]] = []
    for a, b in sents:
        n = count_tokens(text[a:b])
        if n <= cfg.passage_tokens:
            units.append((a, b, n))
            continue
        toks = [m for m in TOKEN_RE.finditer(text, a, b)]
        for i in range(0, len(toks), cfg.passage_tokens):
            chunk = toks[i:i + cfg.passage_tokens]
            units.append((chunk[0].start(), chunk[-1].end(), len(chunk)))
    pieces: list[Piece] = []
    i = 0
    while i < len(units):
        j, total = i, 0
        unit_i = _unit_at(span, units[i][0])
        while j < len(units) and (j == i or (total + units[j][2] <= cfg.passage_tokens
                                             and _unit_at(span, units[j][0]) == unit_i)):
            total += units[j][2]
            j += 1
        a, b = units[i][0], units[j - 1][1]
        pieces.append(Piece(span.offset + a, span.offset + b, span.path, _unit_at(span, a)))
        if j >= len(units):
            break
        # step back for overlap, always advancing at least one sentence
        k, back = j, 0
        while k - 1 > i and back + units[k - 1][2] <= cfg.passage_overlap_tokens:
            k -= 1
            back += units[k][2]
        i = max(k, i + 1)
    return pieces


def guideline_pieces(span: Span, cfg: SegmentConfig) -> list[Piece]:
    text = span.section.text
    limit = span.keep_chars if span.keep_chars is not None else len(text)
    # 1. semantic boundaries: blank lines, list items, line breaks
    frags: list[tuple[int, int]] = []
    pos = 0
    for m in _BOUNDARY.finditer(text, 0, limit):
        a, b = _trim(text, pos, m.start())
        if b > a:
            frags.append((a, b))
        pos = m.end()
    a, b = _trim(text, pos, limit)
    if b > a:
        frags.append((a, b))
    # 2. merge fragments under min_chars into a neighbour (previous, else next): a heading line
    #    joins the paragraph it introduces
    merged = merge_short(frags, cfg.guideline_min_chars)
    # 3. split pieces over max_chars at sentence boundaries, into near-equal parts
    out: list[tuple[int, int]] = []
    for a, b in merged:
        if b - a <= cfg.guideline_max_chars:
            out.append((a, b))
        else:
            sents = _hard_cut(text, sentence_spans(text, a, b), cfg.guideline_max_chars)
            out.extend(pack_balanced(sents, cfg.guideline_max_chars))
    merged = out
    return [Piece(span.offset + a, span.offset + b, span.path, _unit_at(span, a)) for a, b in merged]


def _hard_cut(text: str, sents: list[tuple[int, int]], max_chars: int) -> list[tuple[int, int]]:
    """Sentences longer than max_chars are cut at spaces into near-equal parts."""
    out = []
    for a, b in sents:
        if b - a <= max_chars:
            out.append((a, b))
            continue
        n = -(-(b - a) // max_chars)
        while n > 1:
            goal = a + (b - a) // n
            cut = text.rfind(" ", a + 1, goal + 1)
            cut = cut if cut > a else goal
            out.append(_trim(text, a, cut))
            a = _trim(text, cut, b)[0]
            n -= 1
        if b > a:
            out.append((a, b))
    return out


def pack_balanced(sents: list[tuple[int, int]], max_chars: int) -> list[tuple[int, int]]:
    """Pack consecutive sentence spans into few near-equal chunks of at most max_chars."""
    if not sents:
        return []
    total = sents[-1][1] - sents[0][0]
    n = -(-total // max_chars)
    while True:
        target = total / n
        chunks: list[list[int]] = []
        for a, b in sents:
            if chunks:
                cur = chunks[-1][1] - chunks[-1][0]
                new = b - chunks[-1][0]
                if new <= max_chars and abs(new - target) <= abs(cur - target):
                    chunks[-1][1] = b
                    continue
            chunks.append([a, b])
        if len(chunks) <= n or n >= len(sents):
            return [(a, b) for a, b in chunks]
        n += 1


def merge_short(frags: list[tuple[int, int]], min_chars: int) -> list[tuple[int, int]]:
    """Merge every fragment shorter than ``min_chars`` into its previous (else next) neighbour."""
    out: list[list[int]] = []
    pending: list[int] | None = None  # a short fragment waiting for a next neighbour
    for a, b in frags:
        if pending is not None:
            a = pending[0]
            pending = None
        if b - a < min_chars:
            if out:
                out[-1][1] = b
            else:
                pending = [a, b]
            continue
        out.append([a, b])
    if pending is not None:
        out.append(pending)
    return [(a, b) for a, b in out]


def _common(a: tuple[str, ...], b: tuple[str, ...]) -> tuple[str, ...]:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


def merge_short_sections(pieces: list[Piece], min_chars: int, max_chars: int = 10**9) -> list[Piece]:
    """A fragment still under ``min_chars`` (a whole short section) joins a neighbouring section.

    Preference: a neighbour that stays within ``max_chars``, then a sibling (same parent heading),
    then the previous fragment. The merged passage spans both in the full text and keeps the
    headings the two share.
    """
    out = list(pieces)
    i = 0
    while i < len(out):
        p = out[i]
        if p.end - p.start >= min_chars or len(out) == 1:
            i += 1
            continue
        prev = out[i - 1] if i > 0 and out[i - 1].unit == p.unit else None
        nxt = out[i + 1] if i + 1 < len(out) and out[i + 1].unit == p.unit else None
        sib_prev = prev is not None and prev.path[:-1] == p.path[:-1]
        sib_next = nxt is not None and nxt.path[:-1] == p.path[:-1]
        fits_prev = prev is not None and p.end - prev.start <= max_chars
        fits_next = nxt is not None and nxt.end - p.start <= max_chars
        if fits_prev != fits_next:
            use_prev = fits_prev
        else:
            use_prev = prev is not None and (sib_prev or not sib_next)
        if use_prev and prev is not None:
            out[i - 1] = Piece(prev.start, p.end, _common(prev.path, p.path), p.unit)
            del out[i]
            i = max(i - 1, 0)  # the merged piece may itself still be short
        elif nxt is not None:
            out[i] = Piece(p.start, nxt.end, _common(p.path, nxt.path), p.unit)
            del out[i + 1]
        else:
            i += 1
    return out


@dataclass
class Segmented:
    doc: Document  # the prepared document (passages index its full text)
    passages: list[Passage]
    truncated_sections: int = 0


def segment_document(doc: Document, cfg: SegmentConfig) -> Segmented:
    doc = prepare(doc, cfg)
    spans = spans_of(doc)
    truncated = assign_units(doc, spans, cfg)
    strategy = cfg.strategy.get(doc.source_type.value, "window")
    pieces: list[Piece] = []
    for span in spans:
        pieces.extend(guideline_pieces(span, cfg) if strategy == "guideline" else window_pieces(span, cfg))
    if strategy == "guideline":
        pieces = merge_short_sections(pieces, cfg.guideline_min_chars, cfg.guideline_max_chars)
    full = doc.full_text()
    passages: list[Passage] = []
    seen: dict[str, int] = {}
    for n, piece in enumerate(pieces):
        text = full[piece.start:piece.end]
        path = list(piece.path)
        base = text_id(doc.doc_id, path, text)
        occ = seen.get(base, 0)
        seen[base] = occ + 1
        passages.append(Passage(
            passage_id=text_id(doc.doc_id, path, text, occ) if occ else base,
            doc_id=doc.doc_id, text=text, heading_path=path, start=piece.start, end=piece.end,
            language="zh" if _is_zh(text) else doc.meta.language, unit=piece.unit, ordinal=n,
        ))
    return Segmented(doc, passages, truncated)


def _is_zh(text: str) -> bool:
    cjk = len(_CJK.findall(text))
    return cjk > 0 and cjk * 4 >= sum(1 for c in text if c.isascii() and c.isalpha())


def segment(doc: Document, cfg: SegmentConfig | None = None) -> list[Passage]:
    return segment_document(doc, cfg or SegmentConfig()).passages
