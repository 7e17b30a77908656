"""Where evidence helps and where it hurts: one method against a baseline, question for question,
within groups of questions (dataset, EBM category, question type).

A group's row counts the questions both runs answered, each one's right answers, the questions
only one of them got right and the exact McNemar p-value of that split. Pure functions over
right/wrong marks (``medr2.eval.runner.question_marks``); ``bench/where_evidence_helps.py``
feeds them the committed grid.

>>> method = {"q1": True, "q2": True, "q3": False, "q4": True}
>>> base = {"q1": False, "q2": True, "q3": True, "q4": False, "q5": True}
>>> rows = paired_by_group(method, base, {"q1": "therapy", "q2": "therapy", "q3": "diagnosis", "q4": "therapy"})
>>> [(r.group, r.n, r.base_right, r.method_right, r.only_method, r.only_base) for r in rows]
[('all', 4, 2, 3, 2, 1), ('therapy', 3, 1, 3, 2, 0), ('diagnosis', 1, 1, 0, 0, 1)]
>>> rows[0].delta
25.0
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Mapping

from medr2.eval.scoring import mcnemar_p


@dataclass(frozen=True)
class GroupRow:
    group: str
    n: int
    base_right: int
    method_right: int
    only_method: int  # the method right, the baseline wrong
    only_base: int

    @property
    def delta(self) -> float:
        """Accuracy difference in points, method minus baseline."""
        return 100.0 * (self.method_right - self.base_right) / self.n if self.n else 0.0

    @property
    def p(self) -> float:
        return mcnemar_p(self.only_method, self.only_base)

    @property
    def verdict(self) -> str:
        """'helps' / 'hurts' at p < 0.05, else 'no difference shown'."""
        if self.p < 0.05:
            return "helps" if self.only_method > self.only_base else "hurts"
        return "no difference shown"


def paired_row(group: str, ids: list[str], method: Mapping[str, bool], base: Mapping[str, bool]) -> GroupRow:
    return GroupRow(group, len(ids), sum(bool(base[i]) for i in ids), sum(bool(method[i]) for i in ids),
                    sum(bool(method[i]) and not base[i] for i in ids), sum(bool(base[i]) and not method[i] for i in ids))


def paired_by_group(method: Mapping[str, bool], base: Mapping[str, bool], group_of: Mapping[str, str],
                    min_n: int = 1) -> list[GroupRow]:
    """One row for all the questions both answered, then one per group (largest first) with at least
    ``min_n`` of them. A question without a group counts in "all" only."""
    ids = [i for i in method if i in base]
    groups: dict[str, list[str]] = defaultdict(list)
    for i in ids:
        if i in group_of:
            groups[group_of[i]].append(i)
    rows = [paired_row("all", ids, method, base)]
    for g, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        if len(members) >= min_n:
            rows.append(paired_row(g, members, method, base))
    return rows


def group_table(rows: list[GroupRow], group_name: str = "group") -> str:
    """Markdown: one line per group."""
    out = [f"| {group_name} | N | baseline | method | Δ points | only method / only baseline right | McNemar p | reading |",
           "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        out.append(f"| {r.group} | {r.n} | {r.base_right} | {r.method_right} | {r.delta:+.1f} | {r.only_method} / {r.only_base} "
                   f"| {r.p:.3f} | {r.verdict} |")
    return "\n".join(out)
