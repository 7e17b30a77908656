"""Tier-conditioned prompting (guideline-KG paper): knowledge-graph statements grouped by tier,
core first, extended as supplementary, exploratory as weak hints, with exploratory statements on
high-risk relations (contraindications, doses, interactions) withheld; every statement names
the numbered passages it was read from, so it stays traceable triple -> TextID -> passage text.

Example::

    >>> from medr2.apply.kg_prompt import tier_block
    >>> t = [{"triple_id": "t1", "head": "metformin", "relation": "treats", "tail": "type 2 diabetes",
    ...       "q": 0.9, "tier": "core", "text_ids": ["p1"], "attrs": {}},
    ...      {"triple_id": "t2", "head": "drug X", "relation": "dose_of", "tail": "metformin", "q": 0.5,
    ...       "tier": "exploratory", "text_ids": ["p2"], "attrs": {}}]
    >>> block, shown, withheld = tier_block(t, {"p1": 1}, {"dose_of"})
    >>> print(block)
    Core (well supported; rely on these):
    [T1] metformin -treats-> type 2 diabetes (Q 0.90) from [1]
    1 exploratory statement(s) about contraindications, doses or interactions were withheld as too weakly supported.
    >>> [w["triple_id"] for w in withheld]
    ['t2']
"""

from __future__ import annotations

from typing import Any, Callable

TIERS = [("core", "Core (well supported; rely on these):"),
         ("extended", "Extended (supplementary; use together with their passages):"),
         ("exploratory", "Exploratory (weak; hints only, state the uncertainty):")]


def statement(i: int, t: dict[str, Any], numbers: dict[str, int]) -> str:
    ns = sorted({numbers[x] for x in t.get("text_ids", []) if x in numbers})
    grade = t.get("attrs", {}).get("strength")
    extra = f", strength {grade}" if grade else ""
    where = "from " + ", ".join(f"[{n}]" for n in ns) if ns else "(its passages are not in the context)"
    return f"[T{i}] {t['head']} -{t['relation']}-> {t['tail']} (Q {t['q'] or 0:.2f}{extra}) {where}"


def tier_block(triples: list[dict[str, Any]], numbers: dict[str, int], high_risk: set[str],
               conflicts: list[dict[str, Any]] = ()) -> tuple[str, list[dict[str, Any]], list[dict[str, Any]]]:
    """(prompt block, statements shown with their [T#] numbers, withheld statements)."""
    shown: list[dict[str, Any]] = []
    withheld: list[dict[str, Any]] = []
    lines: list[str] = []
    label: dict[str, int] = {}
    for tier, head in TIERS:
        group = [t for t in triples if t.get("tier") == tier]
        if tier == "exploratory":
            withheld += [t for t in group if t["relation"] in high_risk]
            group = [t for t in group if t["relation"] not in high_risk]
        if not group:
            continue
        lines.append(head)
        for t in group:
            n = len(shown) + 1
            label[t["triple_id"]] = n
            shown.append({**t, "label": f"T{n}"})
            lines.append(statement(n, t, numbers))
    if shown and not any(t.get("tier") == "core" for t in shown):
        lines.append("No core statement bears on this question: the support is weak; say so.")
    for c in conflicts:
        a, b = (label.get(x) for x in c["triples"])
        if a and b:
            lines.append(f"[T{a}] and [T{b}] contradict each other: prefer the higher-quality one and say that "
                         "the sources disagree.")
    if withheld:
        lines.append(f"{len(withheld)} exploratory statement(s) about contraindications, doses or interactions were "
                     "withheld as too weakly supported.")
    return "\n".join(lines), shown, withheld


def cases_block(cases: list[dict]) -> str:
    """The prompt lines of the solved cases matched to a question (TCM-DiffRAG's personalized graph)."""
    if not cases:
        return ""
    return "\n\nSolved cases whose reasoning follows a similar path (guidance, not evidence; do not cite):\n" + \
        "\n".join(f"- Q: {c['question'][:300]} A: {c['answer'][:100]}. Reasoning: {c['reasoning'][:500]}"
                  for c in cases)


def fit_graph_block(triples: list[dict[str, Any]], cases: list[dict], numbers: dict[str, int], high_risk: set[str],
                    conflicts: list[dict[str, Any]], room: int,
                    count: Callable[[str], int]) -> tuple[list[dict[str, Any]], list[dict], int]:
    """The statements and cases that fit ``room`` tokens (the graph block's share of the evidence
    window): the lowest-ranked statements go first, a quarter at a time, then the last cases.
    Returns (statements kept, cases kept, tokens the block takes).

    >>> t = [{"triple_id": f"t{i}", "head": "a", "relation": "treats", "tail": "b", "q": 0.9, "tier": "core",
    ...       "text_ids": [], "attrs": {}} for i in range(8)]
    >>> kept, cases, need = fit_graph_block(t, [], {}, set(), [], room=60, count=lambda s: len(s.split()))
    >>> len(kept), need                 # 8 statements take 111 words, 6 take 84, 4 take 58
    (4, 58)
    """
    while True:
        need = count(tier_block(triples, numbers, high_risk, conflicts)[0] + cases_block(cases))
        if need <= room or not (triples or cases):
            return triples, cases, need
        if triples:
            triples = triples[:len(triples) * 3 // 4]
        else:
            cases = cases[:-1]


ASPECT_LABELS = {"syndrome": "辨证", "disease": "病名", "therapy": "治法", "formula": "方剂"}


def path_text(nodes: dict[str, str]) -> str:
    """A case path's nodes in order: "辨证 X -> 治法 Y -> 方剂 Z"."""
    return " -> ".join(f"{ASPECT_LABELS[a]} {nodes[a]}" for a in ASPECT_LABELS if a in nodes)


def pairs_text(pairs: list) -> str:
    """Matched (finding, definition feature) pairs: "耳鸣 (耳暴鸣), 舌红"."""
    return ", ".join(a if a == b else f"{a} ({b})" for a, b in pairs)


def case_paths_block(cases: list[dict[str, Any]], reasoning_chars: int = 300, shared_only: bool = False) -> str:
    """The prompt lines of TCM-DiffRAG's matched solved cases (medr2.kg.tcm.CaseMatcher.match):
    each case's findings (those the question shares marked), its path syndrome -> therapy ->
    formula, its other answered questions and its reasoning, labelled [C1], [C2], ...
    (``shared_only``: only the findings shared with the question).

    >>> print(case_paths_block([{"case_id": "tcmbench:CVR-1", "matched": [{"finding": "耳鸣", "case_finding": "耳鸣",
    ...     "sim": 1.0}], "nodes": {"syndrome": "肝火上炎证", "therapy": "清肝泻火"}, "question": "q", "answer": "a",
    ...     "reasoning": "", "path": [{"head": "耳鸣", "relation": "indicates_syndrome", "tail": "肝火上炎证"},
    ...     {"head": "舌红", "relation": "indicates_syndrome", "tail": "肝火上炎证"}]}]))
    Solved cases matched on this case's findings (TCM-DiffRAG; guidance, not evidence):
    [C1] tcmbench:CVR-1 findings: 耳鸣*, 舌红 (* shared with this case)
      path: 辨证 肝火上炎证 -> 治法 清肝泻火
    """
    if not cases:
        return ""
    lines = ["Solved cases matched on this case's findings (TCM-DiffRAG; guidance, not evidence):"]
    for i, c in enumerate(cases, 1):
        shared = {m["case_finding"] for m in c.get("matched", [])}
        found = [t["head"] for t in c.get("path", []) if t["relation"].startswith("indicates_")
                 or t["relation"] == "finding_of"]
        if shared_only:
            found = [f for f in found if f in shared]
        if found:
            lines.append(f"[C{i}] {c['case_id']} findings: "
                         + ", ".join(f + "*" * (f in shared) for f in found) + " (* shared with this case)")
        else:
            lines.append(f"[C{i}] {c['case_id']} Q: {c['question'][:200]} A: {c['answer'][:100]}")
        nodes = c.get("nodes") or {}
        if nodes:
            lines.append("  path: " + path_text(nodes))
        other = [t for t in c.get("path", []) if t["relation"] not in ("finding_of",)
                 and not t["relation"].startswith("indicates_") and t["relation"] not in
                 ("of_disease", "treated_by", "prescribes")]
        if found and other:
            lines.append("  answered: " + "; ".join(f"{t['head'][:40]} -> {t['tail'][:40]}" for t in other[:3]))
        if c.get("reasoning") and reasoning_chars:
            lines.append(f"  reasoning: {c['reasoning'][:reasoning_chars]}")
    return "\n".join(lines)


def definition_paths_block(matches: list[dict[str, Any]], n_findings: int) -> str:
    """The general graph's paths for a case: each option term whose GB/T 16751 definition lists
    features the case shows (finding -> term), with the definition's passage number.

    >>> print(definition_paths_block([{"option": "A", "term": "肝火上炎证", "n": 1,
    ...     "pairs": [["耳鸣", "耳暴鸣"], ["舌红", "舌红"]]}], 5))
    Options whose GB/T 16751 definition lists this case's findings (general graph):
    - A 肝火上炎证 [1]: 2 of 5 findings: 耳鸣 (耳暴鸣), 舌红
    """
    rows = [m for m in matches if m["pairs"]]
    if not rows:
        return ""
    lines = ["Options whose GB/T 16751 definition lists this case's findings (general graph):"]
    for m in sorted(rows, key=lambda m: -len(m["pairs"])):
        shown = pairs_text(m["pairs"])
        ref = f" [{m['n']}]" if m.get("n") else ""
        lines.append(f"- {m['option']} {m['term']}{ref}: {len(m['pairs'])} of {n_findings} findings: {shown}")
    return "\n".join(lines)
