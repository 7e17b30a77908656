"""Build a heading tree from a flat list of (level, heading, text) blocks.

Example::

    >>> from medr2.ingest.tree import Block, build_tree
    >>> tree = build_tree([Block(1, "A", "a"), Block(2, "B", "b"), Block(1, "C", "c")])
    >>> [(s.title, [c.title for c in s.children]) for s in tree]
    [('A', ['B']), ('C', [])]
"""

from __future__ import annotations

from dataclasses import dataclass

from medr2.schema import Section


@dataclass
class Block:
    level: int  # 0 = text before any heading
    heading: str
    text: str


def build_tree(blocks: list[Block]) -> list[Section]:
    roots: list[Section] = []
    stack: list[tuple[int, Section]] = []
    for b in blocks:
        text = b.text.strip()
        if b.level <= 0:
            if text:
                roots.append(Section(title="", text=text))
            continue
        node = Section(title=b.heading.strip(), text=text)
        while stack and stack[-1][0] >= b.level:
            stack.pop()
        (stack[-1][1].children if stack else roots).append(node)
        stack.append((b.level, node))
    return roots
