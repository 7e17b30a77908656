"""Loaders for whole documents: plain text, Markdown, HTML and PDF.

Example::

    >>> import tempfile, pathlib
    >>> from medr2.config import Config
    >>> from medr2.ingest.loaders.documents import load_markdown
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "note.md"
    >>> _ = p.write_text("# Diabetes\\n\\nIntro.\\n\\n## Therapy\\n\\nMetformin first.\\n")
    >>> doc = next(load_markdown(p, Config()))
    >>> [h for h, s in doc.walk()]
    [('Diabetes',), ('Diabetes', 'Therapy')]
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any, Iterator

import yaml

from medr2.config import Config
from medr2.ingest.loaders.base import (
    LoadError,
    LoadItem,
    file_doc_id,
    read_text_file,
    register,
)
from medr2.ingest.outline import outline_blocks
from medr2.ingest.tree import Block, build_tree
from medr2.schema import Document, DocumentMeta, SourceType
from medr2.util.text import detect_language

_FRONT = re.compile(r"\A---[ \t]*\n(.*?)\n---[ \t]*\n", re.S)
_META_KEYS = {"year", "publication_types", "mesh_terms", "language", "url"}


def apply_front_matter(fields: dict[str, Any], default_id: str, title: str, path: Path) -> dict[str, Any]:
    """Turn front-matter keys into Document keyword arguments (unknown keys go to meta.extra)."""
    meta: dict[str, Any] = {"origin": str(path)}
    extra: dict[str, Any] = {}
    out: dict[str, Any] = {"doc_id": default_id, "title": title}
    for k, v in fields.items():
        if k == "id":
            out["doc_id"] = str(v)
        elif k == "title":
            out["title"] = str(v)
        elif k == "source_type":
            try:
                out["source_type"] = SourceType(str(v))
            except ValueError:
                raise LoadError(
                    f"front matter source_type {v!r} is not one of {[s.value for s in SourceType]}"
                ) from None
        elif k in _META_KEYS:
            if k in ("publication_types", "mesh_terms") and isinstance(v, str):
                v = [v]
            meta[k] = v
        else:
            extra[k] = v if isinstance(v, (str, int, float, bool, list, dict)) or v is None else str(v)
    meta["extra"] = extra
    out["meta"] = DocumentMeta.model_validate(meta)
    return out


def split_front_matter(text: str, path: Path) -> tuple[dict[str, Any], str]:
    m = _FRONT.match(text)
    if not m:
        return {}, text
    try:
        fields = yaml.safe_load(m.group(1)) or {}
    except yaml.YAMLError as e:
        raise LoadError(f"front matter is not valid YAML: {e}") from None
    if not isinstance(fields, dict):
        raise LoadError("front matter must be a YAML mapping of key: value")
    return fields, text[m.end():]


_ATX = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$")
_SETEXT = re.compile(r"^(=+|-+)[ \t]*$")
# a "#" line this long is a paragraph with a stray mark (text converted from other formats does
# this), not a heading: as a heading its words would reach no passage
MAX_HEADING_WORDS = 40


def markdown_blocks(body: str) -> list[Block]:
    blocks: list[Block] = []
    level, heading, buf = 0, "", []
    in_code = False
    lines = body.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            in_code = not in_code
            buf.append(line)
            i += 1
            continue
        m = None if in_code else _ATX.match(line)
        if m and len(m.group(2).split()) > MAX_HEADING_WORDS:
            m, line = None, m.group(2)
        setext = (
            not in_code
            and i + 1 < len(lines)
            and line.strip()
            and _SETEXT.match(lines[i + 1])
            and (not buf or not buf[-1].strip())
        )
        if m or setext:
            blocks.append(Block(level, heading, "\n".join(buf)))
            if m:
                level, heading = len(m.group(1)), m.group(2)
                i += 1
            else:
                level, heading = (1 if lines[i + 1].strip().startswith("=") else 2), line.strip()
                i += 2
            buf = []
            continue
        buf.append(line)
        i += 1
    blocks.append(Block(level, heading, "\n".join(buf)))
    return blocks


def _finish(path: Path, text: str, fields: dict[str, Any], blocks: list[Block], prefix: str, title: str,
            config: Config) -> Document:
    sections = build_tree(blocks)
    if not sections:
        raise LoadError("no text found")
    kw = apply_front_matter(fields, file_doc_id(prefix, path, text), title, path)
    if "source_type" not in kw and config.ingest.source_type:  # ingest --source-type; front matter wins
        kw["source_type"] = SourceType(config.ingest.source_type)
    doc = Document(sections=sections, **kw)
    if "language" not in fields:
        doc.meta.language = detect_language(doc.full_text())
    if not doc.full_text().strip():
        raise LoadError("no text found")
    return doc


@register("markdown", (".md", ".markdown"))
def load_markdown(path: Path, config: Config) -> Iterator[LoadItem]:
    """Markdown: ATX and setext headings become the heading tree; YAML front matter sets metadata."""
    text = read_text_file(path, config)
    fields, body = split_front_matter(text, path)
    blocks = markdown_blocks(body)
    first_h1 = next((b.heading for b in blocks if b.level == 1), "")
    yield _finish(path, text, fields, blocks, "md", fields.get("title") or first_h1 or path.stem, config)


@register("text", (".txt", ".text"))
def load_text(path: Path, config: Config) -> Iterator[LoadItem]:
    """Plain text: numbered headings ("2 Therapy", "2.1", "第三章") become the heading tree
    (``ingest.numbered_headings``), else one section; optional YAML front matter sets metadata."""
    text = read_text_file(path, config)
    fields, body = split_front_matter(text, path)
    blocks = outline_blocks(body) if config.ingest.numbered_headings else [Block(0, "", body)]
    yield _finish(path, text, fields, blocks, "txt", fields.get("title") or path.stem, config)


class _HTMLText(HTMLParser):
    SKIP = {"script", "style", "nav", "footer", "header", "noscript", "svg", "form", "button", "aside"}
    BREAK = {"p", "div", "li", "tr", "br", "section", "article", "table", "ul", "ol", "dd", "dt", "blockquote", "pre"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self.level, self.heading, self.buf = 0, "", []
        self.skip_depth = 0
        self.in_heading: int = 0
        self.heading_buf: list[str] = []
        self.in_title = False
        self.title = ""

    def _end_heading(self) -> None:
        self.blocks.append(Block(self.level, self.heading, _squash("".join(self.buf))))
        self.level, self.heading, self.buf = self.in_heading, " ".join("".join(self.heading_buf).split()), []
        self.in_heading = 0

    def handle_starttag(self, tag, attrs):
        if self.in_heading and (tag in self.BREAK or re.fullmatch(r"h[1-6]", tag)):
            self._end_heading()  # an unclosed heading ends where the next block starts
        if tag in self.SKIP:
            self.skip_depth += 1
        elif tag == "title":
            self.in_title = True
        elif re.fullmatch(r"h[1-6]", tag) and not self.skip_depth:
            self.in_heading = int(tag[1])
            self.heading_buf = []
        elif tag in self.BREAK:
            self.buf.append("\n")

    def handle_endtag(self, tag):
        if tag in self.SKIP:
            self.skip_depth = max(0, self.skip_depth - 1)
        elif tag == "title":
            self.in_title = False
        elif self.in_heading and tag == f"h{self.in_heading}":
            self._end_heading()
        elif tag in self.BREAK:
            self.buf.append("\n")

    def handle_data(self, data):
        if self.in_title:
            self.title += data
        elif self.skip_depth:
            return
        elif self.in_heading:
            self.heading_buf.append(data)
        else:
            self.buf.append(data)

    def close(self):
        super().close()
        if self.in_heading:
            self._end_heading()
        self.blocks.append(Block(self.level, self.heading, _squash("".join(self.buf))))


def _squash(text: str) -> str:
    lines = [" ".join(line.split()) for line in text.split("\n")]
    return "\n".join(line for line in lines if line)


@register("html", (".html", ".htm", ".xhtml"))
def load_html(path: Path, config: Config) -> Iterator[LoadItem]:
    """HTML: h1-h6 become the heading tree; scripts, styles and navigation are dropped."""
    text = read_text_file(path, config)
    parser = _HTMLText()
    parser.feed(text)
    parser.close()
    first_h1 = next((b.heading for b in parser.blocks if b.level == 1), "")
    title = " ".join(parser.title.split()) or first_h1 or path.stem
    yield _finish(path, text, {}, parser.blocks, "html", title, config)


@register("pdf", (".pdf",))
def load_pdf(path: Path, config: Config) -> Iterator[LoadItem]:
    """PDF text layer (pypdf); top-level bookmarks, when present, become chapters, else numbered
    headings do (``ingest.numbered_headings``)."""
    import logging

    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    size = path.stat().st_size
    if size == 0:
        raise LoadError("empty file")
    if size > config.ingest.max_whole_file_mb * 1024 * 1024:
        raise LoadError(f"file is {size / 1e6:.0f} MB, above ingest.max_whole_file_mb; split it or raise the limit")
    try:
        reader = PdfReader(str(path), strict=False)
        if reader.is_encrypted:
            try:
                reader.decrypt("")
            except Exception:
                raise LoadError("encrypted PDF; decrypt it first") from None
        pages = [(p.extract_text() or "") for p in reader.pages]
        chapters: list[tuple[int, str]] = []
        try:
            for item in reader.outline:
                if isinstance(item, list):
                    continue
                chapters.append((reader.get_destination_page_number(item), str(item.title)))
        except Exception:
            chapters = []
        info_title = (reader.metadata.title if reader.metadata else None) or ""
    except LoadError:
        raise
    except (PdfReadError, Exception) as e:  # pypdf raises many types on corrupt input
        raise LoadError(f"unreadable PDF ({type(e).__name__}: {e}); check the file or re-export it") from None
    if not any(p.strip() for p in pages):
        raise LoadError("PDF has no text layer (scanned?); run OCR first")
    chapters = sorted({(p, t.strip()) for p, t in chapters
                       if t and t.strip() and isinstance(p, int) and 0 <= p < len(pages)})
    blocks: list[Block] = []
    if chapters:
        starts = [p for p, _ in chapters] + [len(pages)]
        if starts[0] > 0:
            blocks.append(Block(0, "", "\n".join(pages[: starts[0]])))
        for (page, title), end in zip(chapters, starts[1:]):
            blocks.append(Block(1, title, "\n".join(pages[page:max(end, page + 1)] if end > page else [])))
    elif config.ingest.numbered_headings:
        blocks = outline_blocks("\n".join(pages))
    else:
        blocks.append(Block(0, "", "\n".join(pages)))
    full = "\n".join(pages)
    yield _finish(path, full, {}, blocks, "pdf", info_title.strip() or path.stem, config)
