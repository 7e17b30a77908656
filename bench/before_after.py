"""Two runs of the same questions, question for question: predictions, right answers (exact
McNemar), seconds and each stage's seconds. A run is a folder of `medr2 eval run` records
(``*/METHOD/MODEL/ID.json``); questions are paired by their record's path under the folder.

    python bench/before_after.py BEFORE AFTER [--stages reformulate,usefulness] [--out FILE.md]

Cache hits distort seconds: a question answered from the answer cache, or with hits in its
retrieval-side stages, is left out of the seconds (it is counted in the predictions).
"""
from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from medr2.eval.breakdown import paired_row


def records(folder: Path) -> dict[str, dict]:
    out = {}
    for f in sorted(folder.rglob("*.json")):
        if f.name == "manifest.json":
            continue
        rec = json.loads(f.read_text())
        out[str(f.relative_to(folder))] = rec[1] if isinstance(rec, list) else rec
    return out


def stage_seconds(rec: dict, name: str) -> float:
    return float(rec.get("usage", {}).get("stages", {}).get(name, {}).get("seconds", 0.0))


def cached(rec: dict) -> bool:
    """A full answer-cache hit, or hits in a stage other than ``generate`` and ``draft`` (the gate's
    scores without evidence and the draft's are reused within a question and from a direct run of
    the same prompt: about a direct answer's cost; bench/results/eval/runs-gated/timing.py)."""
    usage = rec.get("usage") or {}
    stages = usage.get("stages") or {}
    return not usage.get("calls") or any(s.get("cached_calls", 0) for k, s in stages.items()
                                         if k not in ("generate", "draft"))


def compare(before: dict[str, dict], after: dict[str, dict], stages: list[str]) -> str:
    keys = sorted(set(before) & set(after))
    if not keys:
        raise SystemExit("no question answered in both folders: check the two paths")
    B, A = [before[k] for k in keys], [after[k] for k in keys]
    lines = ["| id | gold | before | after | before s | after s | " + " | ".join(f"{s} s b/a" for s in stages) + " |",
             "|---|---|---|---|---:|---:|" + "---:|" * len(stages)]
    for b, a in zip(B, A):
        st = " | ".join(f"{stage_seconds(b, s):.1f} / {stage_seconds(a, s):.1f}" for s in stages)
        lines.append(f"| {a['id']} | {a['gold']} | {b['prediction']} | {a['prediction']} | {b['seconds']:.1f} | "
                     f"{a['seconds']:.1f} | {st} |")
    ids = [a["id"] for a in A]
    row = paired_row("all", ids, {a["id"]: bool(a["correct"]) for a in A}, {b["id"]: bool(b["correct"]) for b in B})
    lines.append(f"\n{row.n} questions: same prediction {sum(b['prediction'] == a['prediction'] for b, a in zip(B, A))}; "
                 f"right before {row.base_right}, after {row.method_right} (only after {row.only_method}, only before "
                 f"{row.only_base}, exact McNemar p = {row.p:.2f})")
    timed = [(b, a) for b, a in zip(B, A) if not cached(b) and not cached(a)]
    if timed:
        med = lambda xs: statistics.median(xs)
        lines.append(f"seconds over the {len(timed)} questions without cache hits: median before "
                     f"{med([b['seconds'] for b, _ in timed]):.1f}, after {med([a['seconds'] for _, a in timed]):.1f}; mean "
                     f"before {statistics.mean(b['seconds'] for b, _ in timed):.1f}, after "
                     f"{statistics.mean(a['seconds'] for _, a in timed):.1f}")
        for s in stages:
            lines.append(f"- {s}: mean s before {statistics.mean(stage_seconds(b, s) for b, _ in timed):.1f}, after "
                         f"{statistics.mean(stage_seconds(a, s) for _, a in timed):.1f}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--stages", default="reformulate,usefulness", help="stages whose seconds are shown")
    ap.add_argument("--out", type=Path, help="also write the table to this file")
    args = ap.parse_args()
    for p in (args.before, args.after):
        if not p.is_dir():
            raise SystemExit(f"{p} is not a folder of eval records")
    text = compare(records(args.before), records(args.after), [s for s in args.stages.split(",") if s])
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
