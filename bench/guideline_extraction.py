"""Recommendation extraction on guideline text that is not an NGC summary (issue 36).

    python bench/guideline_extraction.py labels FILE...  # helpers' quote labels -> offset labels (committed)
    python bench/guideline_extraction.py score [--split dev|report|all] [--show] [--markdown]
    python bench/guideline_extraction.py snapshot OUT.jsonl  # every statement of the NGC trust index
    python bench/guideline_extraction.py diff A.jsonl B.jsonl  # what an extractor change did to NGC text

The 100 raw guideline chunks of ``../shared/data/corpora/guidelines/raw_guideline_chunks_en.jsonl``
(NICE guidance and appraisals, society guidelines) were labelled by the protocol
``bench/data/guideline_recommendation_protocol.md`` (written before any label): every
recommendation unit with its direction, grade as written and strength. The labels are stored as
character offsets into each chunk (``bench/data/guideline_recommendation_labels.jsonl``), so the
text itself stays in ../shared/data.

``score`` reads each chunk the way ``medr2 ingest`` + ``medr2 ask`` do (a guideline record,
segmented into passages; passages under a non-advice heading skipped; each passage's statements
from :func:`medr2.appraise.recommendations.extract`) and reports, per split, recall of the gold
units, precision of the extracted statements, and on matched pairs direction agreement, grades
found and false grades. Extractor changes are chosen on ``DEV`` only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHUNKS = ROOT.parent / "shared" / "data" / "corpora" / "guidelines" / "raw_guideline_chunks_en.jsonl"
LABELS = ROOT / "bench" / "data" / "guideline_recommendation_labels.jsonl"
# fixed before labelling (the protocol): chunks 0-14 were read while the set was planned, so dev
DEV = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 17, 18, 19, 20, 21, 22, 24, 26, 27, 29, 30, 31, 39, 45,
       48, 51, 52, 54, 55, 56, 61, 62, 67, 70, 77, 78, 80, 84, 86, 87, 90, 92, 93, 94, 95]
REPORT = [i for i in range(100) if i not in DEV]
MIN_SHARE = 0.6  # content words shared with the shorter of statement and quote (the protocol)


def chunks() -> list[str]:
    if not CHUNKS.exists():
        sys.exit(f"{CHUNKS} is missing: this benchmark reads the shared data folder (../shared/data)")
    return [json.loads(line)[0] for line in CHUNKS.read_text(encoding="utf-8").splitlines() if line.strip()]


def locate(quote: str, text: str) -> tuple[int, int] | None:
    """Character span of ``quote`` in ``text``, whitespace-insensitive; None when absent."""
    words = quote.split()
    if not words:
        return None
    m = re.search(r"\s+".join(re.escape(w) for w in words), text)
    return (m.start(), m.end()) if m else None


def convert(files: list[Path]) -> None:
    texts = chunks()
    rows, missing = {}, 0
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            r = json.loads(line)
            units = []
            for u in r["units"]:
                span = locate(u["quote"], texts[r["chunk"]])
                if span is None:
                    missing += 1
                    print(f"chunk {r['chunk']}: quote not found: {u['quote'][:90]!r}", file=sys.stderr)
                    continue
                units.append({"start": span[0], "end": span[1], "direction": u["direction"],
                              "grade": u.get("grade"), "strength": u.get("strength"),
                              **({"note": u["note"]} if u.get("note") else {})})
            rows[r["chunk"]] = {"chunk": r["chunk"], "units": units, **({"note": r["note"]} if r.get("note") else {})}
    absent = [i for i in range(len(texts)) if i not in rows]
    if absent:
        sys.exit(f"no labels for chunks {absent}")
    LABELS.write_text("".join(json.dumps(rows[i], ensure_ascii=False) + "\n" for i in sorted(rows)), encoding="utf-8")
    print(f"{LABELS}: {len(rows)} chunks, {sum(len(r['units']) for r in rows.values())} units; {missing} quotes not found")


def statements(i: int, text: str, markdown: bool = False):
    """The statements the product reads from chunk ``i``: one guideline record, segmented; with
    ``markdown`` the chunk is read as a Markdown file is (``medr2 ingest FILE.md --source-type
    guideline``: its "#" headings become the heading path, and passages under a heading that
    describes rather than recommends are skipped)."""
    import tempfile

    from medr2.appraise.recommendations import advice_section, extract
    from medr2.config import Config
    from medr2.ingest.loaders.documents import load_markdown
    from medr2.ingest.loaders.records import record_to_document
    from medr2.ingest.segment import segment

    if markdown:
        cfg = Config()
        cfg.ingest.source_type = "guideline"
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"chunk-{i}.md"
            path.write_text(text, encoding="utf-8")
            doc = next(load_markdown(path, cfg))
    else:
        doc = record_to_document({"id": f"chunk-{i}", "text": text}, {}, CHUNKS, f"chunk {i}", "guideline")
    return [s for p in segment(doc) if advice_section(p.heading_path) for s in extract(p.text)]


def _words(text: str) -> set[str]:
    from medr2.eval.trust import content_words
    return content_words(text)


def matches(statement: str, quote: str) -> float:
    """0 for no match; else how well (1 when the quote lies inside the statement)."""
    sq, qq = " ".join(statement.lower().split()), " ".join(quote.lower().split())
    if qq in sq:
        return 1.0
    a, b = _words(statement), _words(quote)
    if not a or not b:
        return 0.0
    share = len(a & b) / min(len(a), len(b))
    return share if share >= MIN_SHARE else 0.0


def same_grade(found: str | None, gold: str | None) -> bool:
    if not found or not gold:
        return False
    f, g = (re.sub(r"[^a-z0-9+]", "", x.lower()) for x in (found, gold))
    return f in g or g in f


def score(split: str, show: bool, markdown: bool = False) -> dict:
    texts = chunks()
    labels = {r["chunk"]: r for r in map(json.loads, LABELS.read_text(encoding="utf-8").splitlines())}
    ids = {"dev": DEV, "report": REPORT, "all": list(range(100))}[split]
    c = dict(gold=0, found=0, stmts=0, correct=0, pairs=0, direction=0, gold_graded=0, grade_found=0,
             strength_same=0, false_grade=0)
    for i in ids:
        text = texts[i]
        gold = [(text[u["start"]:u["end"]], u) for u in labels[i]["units"]]
        st = statements(i, text, markdown)
        c["gold"] += len(gold)
        c["stmts"] += len(st)
        hit = [False] * len(gold)
        for s in st:
            score_ = [matches(s.statement, q) for q, _ in gold]
            best = max(range(len(gold)), key=lambda k: score_[k], default=None)
            ok = best is not None and score_[best] > 0
            c["correct"] += ok
            if ok:
                hit[best] = True
                u = gold[best][1]
                c["pairs"] += 1
                c["direction"] += s.direction == u["direction"]
                c["false_grade"] += bool(s.grade) and not u["grade"]
                if u["grade"]:
                    c["gold_graded"] += 1
                    c["grade_found"] += same_grade(s.grade, u["grade"])
                    c["strength_same"] += s.strength == u["strength"]
            if show:
                tag = "OK " if ok else "XX "
                print(f"[{i}] {tag}{s.direction:8} {str(s.grade):24} {s.statement[:150]!r}")
        for (q, u), h in zip(gold, hit):
            c["found"] += h
            if show and not h:
                print(f"[{i}] MISS {u['direction']:8} {str(u['grade']):24} {q[:150]!r}")
    return c


def snapshot(out: Path) -> None:
    """Every statement the extractor reads from the NGC trust index (bench/eval.py's), one line each."""
    import sqlite3

    from medr2.appraise.recommendations import advice_section, extract

    store = ROOT / "bench" / "out" / "eval" / "trust-index" / "store.sqlite"
    if not store.exists():
        sys.exit(f"{store} is missing: build it with python bench/guideline.py collect")
    con = sqlite3.connect(store)
    n = 0
    with out.open("w", encoding="utf-8") as f:
        for pid, text, path in con.execute("select passage_id, text, heading_path from passages order by rowid"):
            if not advice_section(json.loads(path or "[]")):
                continue
            for s in extract(text):
                f.write(json.dumps({"passage": pid, "statement": s.statement, "grade": s.grade,
                                    "strength": s.strength, "direction": s.direction, "firm": s.firm}) + "\n")
                n += 1
    print(f"{out}: {n} statements")


def diff(a: Path, b: Path, show: int = 12) -> None:
    def load(p: Path) -> dict:
        rows: dict = {}
        for line in p.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            rows.setdefault(r["passage"], []).append(r)
        return rows
    old, new = load(a), load(b)
    kinds = {"passages changed": 0, "statements gone": 0, "statements new": 0, "grade changed": 0,
             "direction changed": 0}
    shown = 0
    for pid in sorted(set(old) | set(new)):
        o = {r["statement"]: r for r in old.get(pid, [])}
        n = {r["statement"]: r for r in new.get(pid, [])}
        changed = False
        for kind, mark, only in (("statements gone", "-", o.keys() - n.keys()),
                                 ("statements new", "+", n.keys() - o.keys())):
            for st in only:
                kinds[kind] += 1
                changed = True
                if shown < show:
                    print(f"{mark} {st[:160]!r}")
                    shown += 1
        for st in o.keys() & n.keys():
            for k, name in (("grade", "grade changed"), ("direction", "direction changed")):
                if o[st][k] != n[st][k]:
                    kinds[name] += 1
                    changed = True
                    if shown < show:
                        print(f"~ {k}: {o[st][k]!r} -> {n[st][k]!r}: {st[:120]!r}")
                        shown += 1
        kinds["passages changed"] += changed
    print(json.dumps(kinds))


def table(rows: dict[str, dict]) -> str:
    out = ["| split | chunks | gold units | statements | recall | precision | direction agrees | gold grades found "
           "| strength agrees | false grades |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    pct = lambda a, b: f"{100 * a / b:.0f}% ({a}/{b})" if b else "-"  # noqa: E731
    for split, c in rows.items():
        n = len({"dev": DEV, "report": REPORT, "all": range(100)}[split])
        out.append(f"| {split} | {n} | {c['gold']} | {c['stmts']} | {pct(c['found'], c['gold'])} | "
                   f"{pct(c['correct'], c['stmts'])} | {pct(c['direction'], c['pairs'])} | "
                   f"{pct(c['grade_found'], c['gold_graded'])} | {pct(c['strength_same'], c['gold_graded'])} | "
                   f"{pct(c['false_grade'], c['pairs'])} |")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    lab = sub.add_parser("labels")
    lab.add_argument("files", nargs="+", type=Path)
    sc = sub.add_parser("score")
    sc.add_argument("--split", choices=["dev", "report", "all"], default="dev")
    sc.add_argument("--show", action="store_true", help="print each statement and each missed unit")
    sc.add_argument("--markdown", action="store_true", help="read each chunk as a Markdown file (headings as sections)")
    sn = sub.add_parser("snapshot")
    sn.add_argument("out", type=Path)
    df = sub.add_parser("diff")
    df.add_argument("a", type=Path)
    df.add_argument("b", type=Path)
    df.add_argument("--show", type=int, default=12)
    a = ap.parse_args()
    if a.cmd == "labels":
        convert(a.files)
    elif a.cmd == "snapshot":
        snapshot(a.out)
    elif a.cmd == "diff":
        diff(a.a, a.b, a.show)
    else:
        print(table({a.split: score(a.split, a.show, a.markdown)}))


if __name__ == "__main__":
    main()
