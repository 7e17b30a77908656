"""TCMBench's first level (TCM licensing-exam questions), read into one typed item per question.

A file is ``{type, prefix_prompt, keywords, example: [...]}``; ``type`` names the item kind:

* ``FKU`` (A1/A2): ``{question, answer: [letters], analysis}``; the options are lines of the
  question ("A．目赤");
* ``CVR`` (A3/A4 case vignettes): ``{share_content, question: [{sub_question, answer, analysis}]}``;
  the case is shared by its sub-questions, each with its own options;
* ``KHC`` (B1): ``{share_content, question: [...]}`` where ``share_content`` holds the five options
  the sub-questions share.

Every item keeps its group (the case or option set its sub-questions share), so a split never
puts sub-questions of one case on both sides. The ``tcmbench`` ingest format stores each solved
item (case, question, answer and analysis) as a document: the case texts vanilla RAG retrieves.

Example::

    >>> from medr2.ingest.loaders.tcmbench import split_options
    >>> split_options("其证型是（  ）。\\nA．肝火上炎\\nB．肝阳上亢\\n")
    ('其证型是（  ）。', {'A': '肝火上炎', 'B': '肝阳上亢'})
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Optional

from medr2.config import Config
from medr2.ingest.loaders.base import LoadError, LoadItem, register
from medr2.schema import Document, DocumentMeta, Section, SourceType

KINDS = ("CVR", "FKU", "KHC")
_OPTION = re.compile(r"^\s*([A-J])\s*[．.、:：)）]\s*(.*)$")
_NUMBER = re.compile(r"^\s*\d+\)\s*[．.]?\s*")  # "1)．" before a sub-question


@dataclass(frozen=True)
class TCMItem:
    kind: str  # CVR, FKU or KHC
    group: str  # the case / option set this question shares with its siblings ("CVR-14")
    id: str  # "CVR-14-1"
    context: str  # the shared case text ("" for FKU and KHC)
    stem: str  # the question without its options
    options: dict[str, str]
    answer: str  # letters, sorted ("D"; "AB" for a multiple answer)
    analysis: str  # the reasoning, "" when the item has none

    @property
    def text(self) -> str:
        """The question as a reader sees it: the case, then the stem."""
        return f"{self.context}\n{self.stem}".strip() if self.context else self.stem

    @property
    def answer_text(self) -> str:
        return "；".join(self.options.get(x, x) for x in self.answer)


_WIDE = str.maketrans({chr(0xFF21 + i): chr(0x41 + i) for i in range(10)})  # "Ａ" -> "A"
_INLINE = re.compile(r"(?:(?<=\s)|^)([A-J])\s*[．.、:：)）]\s*")


def split_options(block: str) -> tuple[str, dict[str, str]]:
    """The text before the first option line, and the options ("A．..." lines; full-width letters
    read as ASCII). Options written on one line ("... A．目赤 B．溲赤 C．便干") are read when no line
    opens with one, provided they run A, B, C... in order.

    >>> split_options("其证型是（  ）。 A．肝火上炎 B．肝阳上亢")
    ('其证型是（  ）。', {'A': '肝火上炎', 'B': '肝阳上亢'})
    """
    stem, opts = [], {}
    block = block.translate(_WIDE)
    for line in block.splitlines():
        m = _OPTION.match(line)
        if m and (opts or m.group(1) == "A"):
            opts[m.group(1)] = m.group(2).strip()
        elif opts and line.strip():
            last = list(opts)[-1]
            opts[last] = f"{opts[last]}{line.strip()}"
        elif not opts:
            stem.append(line)
    if not opts:
        return inline_options(block)
    return "\n".join(s for s in stem if s.strip()).strip(), opts


def inline_options(block: str) -> tuple[str, dict[str, str]]:
    """Options on one line: the letter marks that run A, B, C... in order from the last "A"
    mark; ({}) when there are fewer than two."""
    marks = list(_INLINE.finditer(block))
    starts = [i for i, m in enumerate(marks) if m.group(1) == "A"]
    for start in reversed(starts):
        run = [marks[start]]
        for m in marks[start + 1:]:
            if ord(m.group(1)) == ord(run[-1].group(1)) + 1:
                run.append(m)
        if len(run) >= 2:
            ends = [m.start() for m in run[1:]] + [len(block)]
            opts = {m.group(1): block[m.end():e].strip() for m, e in zip(run, ends)}
            if all(opts.values()):
                return block[:run[0].start()].strip(), opts
    return block.strip(), {}


def _answer(value: Any, where: str, options: dict[str, str]) -> str:
    letters = value if isinstance(value, list) else [value]
    got = "".join(sorted({c for x in letters for c in str(x).translate(_WIDE).upper() if not c.isspace()
                          and c not in ",，、;；"}))  # ["A", "B"], "AB", "A,B", "Ａ"
    if not got or any(x not in options for x in got):
        raise LoadError(f"{where}: the answer {value!r} is not among the options {sorted(options)}")
    return got


def read_tcmbench(path: str | Path, skipped: Optional[list[str]] = None) -> Iterator[TCMItem]:
    """Every question of a TCMBench file; a malformed record is an error naming it. A question
    with no text at all (the released files hold a few) is skipped and named in ``skipped``."""
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise LoadError(f"{p}: not a TCMBench JSON file ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("example"), list):
        raise LoadError(f"{p}: not a TCMBench file: expected an object with an 'example' list")
    kind = str(data.get("type") or p.stem).upper()
    for n, rec in enumerate(data["example"], 1):
        where = f"{p}: example {n}"
        if not isinstance(rec, dict) or "question" not in rec:
            raise LoadError(f"{where}: no 'question'")
        group = f"{kind}-{rec.get('index', n)}"
        if isinstance(rec["question"], str):  # A1/A2: one question, options inside it
            if not rec["question"].strip():
                if skipped is not None:
                    skipped.append(f"{where}: empty question, skipped")
                continue
            stem, opts = split_options(rec["question"])
            if len(opts) < 2:
                raise LoadError(f"{where}: no options (lines 'A．...') in the question")
            yield TCMItem(kind, group, group, "", stem, opts, _answer(rec.get("answer"), where, opts),
                          str(rec.get("analysis") or "").strip())
            continue
        shared = str(rec.get("share_content") or "")
        shared_stem, shared_opts = split_options(shared)
        for k, sub in enumerate(rec["question"], 1):
            w = f"{where} sub-question {k}"
            if not isinstance(sub, dict) or "sub_question" not in sub:
                raise LoadError(f"{w}: no 'sub_question'")
            if not str(sub["sub_question"]).strip():
                if skipped is not None:
                    skipped.append(f"{w}: empty question, skipped")
                continue
            stem, opts = split_options(_NUMBER.sub("", str(sub["sub_question"])))
            opts = opts or shared_opts
            if len(opts) < 2:
                raise LoadError(f"{w}: no options in the sub-question or the shared content")
            context = shared_stem if not shared_opts else ""  # B1: the shared content is the options
            yield TCMItem(kind, group, f"{group}-{k}", context, stem, opts, _answer(sub.get("answer"), w, opts),
                          str(sub.get("analysis") or "").strip())


def is_tcmbench(path: Path) -> bool:
    try:
        with path.open("rb") as fh:
            head = fh.read(4096)
    except OSError:
        return False
    return b'"prefix_prompt"' in head and b'"example"' in head


def item_document(items: list[TCMItem], origin: str) -> Document:
    """One solved case (a group) as a document: the case, then each question with its answer and
    its analysis, one section per question."""
    first = items[0]
    sections = [Section(title=f"{it.stem[:60]}", text=f"{it.stem}\n答案：{it.answer_text}"
                        + (f"\n解析：{it.analysis}" if it.analysis else "")) for it in items]
    if first.context:
        sections.insert(0, Section(title="病例", text=first.context))
    return Document(doc_id=f"tcmbench:{first.group}", title=(first.context or first.stem)[:40],
                    source_type=SourceType.entry, sections=sections,
                    meta=DocumentMeta(origin=origin, language="zh", extra={"kind": first.kind}))


def grouped(items: Iterator[TCMItem]) -> Iterator[list[TCMItem]]:
    """Consecutive items of one group together."""
    batch: list[TCMItem] = []
    for it in items:
        if batch and it.group != batch[0].group:
            yield batch
            batch = []
        batch.append(it)
    if batch:
        yield batch


@register("tcmbench")
def load_tcmbench(path: Path, config: Config) -> Iterator[LoadItem]:
    """TCMBench solved items: one document per case or question group."""
    for group in grouped(read_tcmbench(path)):
        yield item_document(group, f"{path}:{group[0].group}")
