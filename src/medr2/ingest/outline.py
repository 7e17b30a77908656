"""Find the heading outline of plain text: numbered headings such as ``2 Therapy``,
``2.1 First line``, ``2.1.3`` (a number alone, the title on the next line, as national
standards set their term entries), ``第三章 治疗`` or ``Part 2``.

Plain text and PDF text layers have no markup, so without this a national standard or a
textbook becomes one flat section and the macro (heading) graph learns nothing from it.

A line counts as a heading only when it can be read as one in sequence:

* its number follows the last heading's (a first child ``2.1`` under ``2``, a next sibling
  ``2.2``, or the next number of an ancestor ``3``), or restarts at ``1`` in the same style
  (concatenated documents restart their numbering); the first one ends in 1 or 0;
* it is short, does not end like a sentence (``.`` ``;`` ``:`` ``。`` ``；`` ...) and holds no
  sentence end inside (a numbered paragraph that wraps: ``2. Grant of License. Subject to``);
* it is not a table-of-contents line (a tab or dot leaders before a page number), a dose
  ("1 tablet", "2 mg/kg"), a date ("15 March 2021") or a numbered sentence that wraps onto a
  line starting in lower case;
* a part or chapter starts its line (a Chinese one may follow the document's title after a
  space), and the same one again (a running header, a title repeated above the body) is text;
* something follows it before the next heading at its level: body text or a child.

Numbered lists (``1. Take aspirin.``) fail the sentence or the sequence test, and a text with
fewer than two headings keeps one section. Levels: parts, then chapters, then sections
(``第N节``), then the decimal outline by depth.

Example::

    >>> text = "Intro line.\\n1 Scope\\nThis covers adults.\\n2 Therapy\\n2.1\\n  Metformin\\nFirst line.\\n"
    >>> [(b.level, b.heading) for b in outline_blocks(text)]
    [(0, ''), (1, '1 Scope'), (1, '2 Therapy'), (2, '2.1 Metformin')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from medr2.ingest.tree import Block

_CN_DIGITS = "零〇一二三四五六七八九十百两"
_NUM = r"(\d{1,2}(?:\.\d{1,3}){0,4})"
# "2 Title", "2. Title", "2) Title", and Chinese "2、标题" / "2．标题"
_DECIMAL = re.compile(r"^[ \t\u3000]{0,4}" + _NUM + r"(?:(?P<sep>[.)])[ \t\u3000]+|(?P<cjk>[、．])[ \t\u3000]*|[ \t\u3000]+)"
                      r"(?P<title>\S.*?)\s*$")
_NUMBER_ONLY = re.compile(r"^[ \t\u3000]{0,4}(\d{1,2}(?:\.\d{1,3}){1,4})\s*$")
_NAMED = re.compile(r"^[ \t\u3000]*(?P<pre>.{0,30}?)(?:第(?P<cn>[\d" + _CN_DIGITS + r"]{1,4})(?P<kind>部分|章|节)"
                    r"|(?P<en>Part|PART|Chapter|CHAPTER)\s+(?P<n>\d{1,3}|[IVXLC]{1,6})\b)(?P<title>.*?)\s*$")
_TOC = re.compile(r"(\t\s*\d{1,4}|\.{3,}\s*\d{1,4}|…+\s*\d{1,4})\s*$")
_SENTENCE_END = tuple(".;:,!?。；：，！？、")
# a sentence ends inside the line: a run-in heading or a numbered paragraph ("2. Grant. Subject to")
_INNER_SENTENCE = re.compile(r"(?<!\b[A-Z][a-z])(?<!\b[A-Za-z])[.!?]\s+[A-Z]|[。！？].")
# "10 mg daily", "1 tablet at night", "2 mg/kg" are doses, not chapters
_UNITS = {"mg", "g", "kg", "mcg", "µg", "\u03bcg", "ng", "ml", "l", "mmol", "mol", "meq", "cm", "mm", "m", "iu", "u",
          "units", "unit", "%", "years", "year", "days", "day", "hours", "hour", "h", "min", "mins", "minutes",
          "minute", "weeks", "week", "months", "month", "patients", "times", "x", "tablet", "tablets", "capsule",
          "capsules", "dose", "doses", "drop", "drops", "puff", "puffs", "mmhg", "bpm", "°c", "cases", "of"}
_MONTHS = {"january", "february", "march", "april", "may", "june", "july", "august", "september", "october",
           "november", "december", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "sept", "oct", "nov", "dec"}
_KINDS = ("part", "chapter", "section")


@dataclass
class _Candidate:
    line: int  # index of the heading line
    body_from: int  # first line after the heading (after the title line of a number-only heading)
    kind: str  # part / chapter / section / decimal
    number: tuple[int, ...]
    dotted: bool  # "1." / "1)" / "1、" style rather than "1 "
    heading: str


def _title_ok(title: str, max_chars: int) -> bool:
    title = title.strip()
    first = title.split()[0].lower().split("/")[0] if title else ""
    return (0 < len(title) <= max_chars and not title.endswith(_SENTENCE_END) and first not in _UNITS
            and first not in _MONTHS
            and not _INNER_SENTENCE.search(title)
            and not _TOC.search(title) and any(ch.isalpha() for ch in title))


def _candidate(lines: list[str], i: int, max_chars: int) -> Optional[_Candidate]:
    line = lines[i]
    if _TOC.search(line):
        return None
    m = _NAMED.match(line)
    if m and _named_ok(m, line.strip(), max_chars):
        kind = {"部分": "part", "章": "chapter", "节": "section"}.get(m.group("kind") or "")
        if not kind:
            kind = "part" if m.group("en").lower() == "part" else "chapter"
        return _Candidate(i, i + 1, kind, (), False, line.strip())
    m = _DECIMAL.match(line)
    if m:
        number = tuple(int(x) for x in m.group(1).split("."))
        title = m.group("title")
        nxt = next((x.strip() for x in lines[i + 1:i + 4] if x.strip()), "")
        wraps = nxt[:1].islower() and nxt[:1].isascii()  # "1. Offer metformin to adults with type 2\ndiabetes..."
        if _title_ok(title, max_chars) and not title[0].isdigit() and not wraps:
            return _Candidate(i, i + 1, "decimal", number, bool(m.group("sep") or m.group("cjk")),
                              f"{m.group(1)} {title.strip()}")
        return None
    m = _NUMBER_ONLY.match(line)
    if m:
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        if j < len(lines) and _title_ok(lines[j], max_chars) and not _DECIMAL.match(lines[j]) \
                and not _NUMBER_ONLY.match(lines[j]):
            number = tuple(int(x) for x in m.group(1).split("."))
            return _Candidate(i, j + 1, "decimal", number, False, f"{m.group(1)} {lines[j].strip()}")
    return None


def _named_ok(m: re.Match, whole: str, max_chars: int) -> bool:
    """A part or chapter line, not prose that mentions one: an English marker starts its line and
    is followed by a title-like word ("Chapter 3 Diabetes", not "Part 1 of the trial enrolled");
    a Chinese one starts its line or follows the document's title after a space
    ("中医临床诊疗术语 第2部分：证候", not "详见第三章中有关")."""
    pre, title = m.group("pre"), m.group("title").strip(" \t\u3000:：.-—")
    if len(whole) > max_chars or whole.endswith(_SENTENCE_END) or _INNER_SENTENCE.search(whole):
        return False
    if m.group("en"):
        return not pre.strip() and (not title or not title[0].islower())
    return not pre.strip() or (pre[-1:].isspace() and not any(ch in pre for ch in "，。；、"))


def _follows(number: tuple[int, ...], last: tuple[int, ...]) -> bool:
    """Whether ``number`` can come right after heading ``last`` in an outline; an outline (or a
    part's or chapter's) starts at a first number: 1, 0, 1.1 or 3.1 ("15 March 2021" starts none)."""
    if not last:
        return number[-1] in (0, 1)
    if len(number) == len(last) + 1 and number[:-1] == last and number[-1] == 1:
        return True  # first child
    k = len(number)
    return k <= len(last) and number[:-1] == last[: k - 1] and number[-1] == last[k - 1] + 1


def outline_blocks(text: str, max_title_chars: int = 150, min_headings: int = 2) -> list[Block]:
    """Split plain text into (level, heading, text) blocks along its numbered headings; one
    level-0 block when fewer than ``min_headings`` headings are found (see the module doc)."""
    lines = text.split("\n")
    found: list[_Candidate] = []
    last: tuple[int, ...] = ()
    style: Optional[bool] = None  # dotted or not, from the first decimal heading accepted
    named_seen: set[str] = set()
    i = 0
    while i < len(lines):
        c = _candidate(lines, i, max_title_chars)
        if c is None:
            i += 1
            continue
        if c.kind != "decimal":
            key = " ".join(c.heading.split())
            if key in named_seen:  # a running header, or a part titled again above its body: text
                i += 1
                continue
            named_seen.add(key)
        if c.kind == "decimal":
            restart = c.number == (1,) and bool(last) and style == c.dotted
            if not (_follows(c.number, last) or restart):
                i += 1
                continue
        found.append(c)
        if c.kind == "decimal":
            last = c.number
            style = c.dotted if style is None else style
        else:
            last = ()  # a new part or chapter: the numbering may start again
        i = c.body_from
    # A heading needs something under it: body text or a deeper heading before the next one.
    kept: list[_Candidate] = []
    for n, c in enumerate(found):
        nxt = found[n + 1] if n + 1 < len(found) else None
        end = nxt.line if nxt else len(lines)
        has_body = any(lines[j].strip() for j in range(c.body_from, end))
        deeper = nxt is not None and (
            (c.kind == "decimal" and nxt.kind == "decimal" and len(nxt.number) > len(c.number))
            or (c.kind != "decimal" and (nxt.kind == "decimal" or _KINDS.index(nxt.kind) > _KINDS.index(c.kind))))
        if has_body or deeper:
            kept.append(c)
    if len(kept) < min_headings:
        return [Block(0, "", text)]
    named = [k for k in _KINDS if any(c.kind == k for c in kept)]

    def level(c: _Candidate) -> int:
        return named.index(c.kind) + 1 if c.kind != "decimal" else len(named) + len(c.number)

    blocks: list[Block] = []
    head = "\n".join(lines[: kept[0].line])
    if head.strip():
        blocks.append(Block(0, "", head))
    for n, c in enumerate(kept):
        end = kept[n + 1].line if n + 1 < len(kept) else len(lines)
        blocks.append(Block(level(c), c.heading, "\n".join(lines[c.body_from:end])))
    return blocks
