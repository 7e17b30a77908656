"""Benchmarks of the knowledge graph (issue 4) on ../shared/data; prints markdown tables.

Sections (``--only`` picks some):

* ``build`` - the graph over all NGC guideline summaries with the deterministic and structured
  extractors (segmentation as ingestion does it, no embeddings): passages/s, triples, tier
  distribution, relations; time to recompute after one review (confirm) and after removing one
  document; subgraph retrieval latency p50/p95 over the hand-written question set.
* ``quality`` - on the hand-labelled triples (bench/data/kg_triple_labels*.jsonl; rounds 1-2 dev, round 3 held out): ROC-AUC of
  SchemaConf, EvidScore and Q(t); precision per tier; graded retention (tiers) against strict
  schema hard-filtering: how many labelled-correct triples each keeps.
* ``sample`` - write a stratified sample of triples with their source passages for labelling
  (``--sample-out``; not part of ``all``).

The graph is kept under bench/out/ngc-kg (not committed) so that ``quality`` reuses it.

Usage::

    python bench/kg.py                   # build + quality (~2 minutes on 2 cores)
    python bench/kg.py --only sample --sample-out /tmp/kg_sample.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sqlite3
import statistics
import sys
import time
from collections import Counter
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

SHARED = Path(os.environ.get("MEDR2_SHARED_DATA", ROOT.parent / "shared" / "data"))
NGC = SHARED / "corpora" / "guidelines" / "ngc_summaries.jsonl"
MESH = SHARED / "terminologies" / "mesh" / "mtrees2019.bin"
OUT = ROOT / "bench" / "out" / "ngc-kg"
LABELS = ROOT / "bench" / "data" / "kg_triple_labels.jsonl"  # round 1 (drawn from the first extraction)
LABELS2 = ROOT / "bench" / "data" / "kg_triple_labels_round2.jsonl"  # round 2 (after its fixes)
LABELS3 = ROOT / "bench" / "data" / "kg_triple_labels_round3.jsonl"  # round 3 (uniform sample, held out)
QUESTIONS = ROOT / "bench" / "data" / "ngc_questions.jsonl"


def config():
    from medr2.config import Config

    cfg = Config()
    cfg.kg.terminologies = ["drugs", "icd10", "hpo"] + ([f"mesh:{MESH}"] if MESH.is_file() else [])
    return cfg


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def build(limit=None):
    from medr2.ingest.loaders.corpora import ngc_record
    from medr2.ingest.segment import segment_document
    from medr2.kg.build import KGBuilder, QualityModel, library_for, make_extractors, review
    from medr2.kg.store import KGStore

    cfg = config()
    OUT.mkdir(parents=True, exist_ok=True)
    for f in OUT.glob("*.sqlite*"):
        f.unlink()
    t = time.perf_counter()
    lib = library_for(cfg.kg)
    t_lib = time.perf_counter() - t
    kg = KGStore(OUT / "kg.sqlite")
    texts = sqlite3.connect(str(OUT / "passages.sqlite"))
    texts.execute("CREATE TABLE IF NOT EXISTS p (text_id TEXT PRIMARY KEY, doc_id TEXT, heading TEXT, text TEXT)")
    b = KGBuilder(kg, lib, make_extractors(["rules", "structured"], lib), cfg.kg)
    n_docs = n_pass = 0
    t_seg = t_ext = 0.0
    touched = set()
    with open(NGC, encoding="utf-8") as f:
        for i, line in enumerate(f):
            if limit and i >= limit:
                break
            t0 = time.perf_counter()
            doc = ngc_record(json.loads(line), f"{NGC}:{i + 1}")
            seg = segment_document(doc, cfg.segment)
            t1 = time.perf_counter()
            touched |= b.add_document(seg.doc, seg.passages, doc.content_hash())
            t_ext += time.perf_counter() - t1
            t_seg += t1 - t0
            texts.executemany("INSERT OR REPLACE INTO p VALUES (?,?,?,?)",
                              [(p.passage_id, p.doc_id, " > ".join(p.heading_path), p.text) for p in seg.passages])
            n_docs += 1
            n_pass += len(seg.passages)
    texts.commit()
    t0 = time.perf_counter()
    schema = b.induce_schema()
    t_schema = time.perf_counter() - t0
    t0 = time.perf_counter()
    from medr2.kg.extract import extractor_relations
    from medr2.kg.quality import quality_stamp

    qm = QualityModel(kg, cfg.kg)
    kg.set_meta("quality_stamp", quality_stamp(qm.constant, extractor_relations()))
    with kg.transaction():
        qm.recompute(touched | schema.pop("remapped"))
    t_quality = time.perf_counter() - t0
    c = kg.counts()
    # one review: confirm an exploratory triple; only it (and its reverse) is recomputed
    tid = kg.db.execute("SELECT triple_id FROM triples WHERE tier='exploratory' ORDER BY triple_id LIMIT 1").fetchone()[0]
    r = review(kg, cfg.kg, tid, "confirm", "bench", "timing")
    # one document removed: its contribution withdrawn, the rest rescored
    doc = kg.db.execute("SELECT doc_id FROM kg_docs ORDER BY doc_id LIMIT 1").fetchone()[0]
    t0 = time.perf_counter()
    with kg.transaction():
        gone = kg.remove_doc(doc)
        QualityModel(kg, cfg.kg).recompute([x for x in gone if kg.triple(x)])
    t_remove = time.perf_counter() - t0
    # re-add it so the graph stays complete for the quality section
    with open(NGC, encoding="utf-8") as f:
        for i, line in enumerate(f):
            rec = json.loads(line)
            if f"ngc:{rec['ngc_id']}" == doc:
                d = ngc_record(rec, "x")
                seg = segment_document(d, cfg.segment)
                with kg.transaction():
                    QualityModel(kg, cfg.kg).recompute(b.add_document(seg.doc, seg.passages, d.content_hash()))
                break
    lat = latency(kg, lib, cfg)
    kg.close()
    return {"documents": n_docs, "passages": n_pass, "library_s": t_lib, "segment_s": t_seg, "extract_s": t_ext,
            "schema_s": t_schema, "quality_s": t_quality, "counts": c, "review_s": r["seconds"],
            "review": (r["before"]["tier"], r["after"]["tier"], r["before"]["q"], r["after"]["q"]),
            "remove_s": t_remove, "removed_touched": len(gone), "latency": lat, "schema": schema}


def latency(kg, lib, cfg):
    from medr2.search.graph import GraphSearcher

    gs = GraphSearcher(kg, lib, cfg)
    qs = [json.loads(x)["question"] for x in QUESTIONS.read_text().splitlines()] if QUESTIONS.is_file() else []
    link, sub, linked, found = [], [], 0, 0
    for q in qs:
        t0 = time.perf_counter()
        links = gs.link(q)
        t1 = time.perf_counter()
        triples = gs.subgraph(links)
        t2 = time.perf_counter()
        link.append((t1 - t0) * 1000)
        sub.append((t2 - t1) * 1000)
        linked += bool(links)
        found += bool(triples)
    if not qs:
        return None
    return {"n": len(qs), "link_p50": pct(link, 50), "link_p95": pct(link, 95), "sub_p50": pct(sub, 50),
            "sub_p95": pct(sub, 95), "total_p50": pct([a + b for a, b in zip(link, sub)], 50),
            "total_p95": pct([a + b for a, b in zip(link, sub)], 95), "linked": linked, "with_triples": found}


def print_build(r):
    c = r["counts"]
    print(f"\n### Graph over the NGC guideline summaries ({r['documents']} documents, {r['passages']} passages)\n")
    print("| step | seconds | rate |")
    print("|---|---:|---|")
    print(f"| terminology library (cached JSON) | {r['library_s']:.1f} | |")
    print(f"| segmentation | {r['segment_s']:.1f} | {r['passages'] / r['segment_s']:.0f} passages/s |")
    print(f"| extraction (rules + structured) + storage | {r['extract_s']:.1f} | "
          f"{r['passages'] / r['extract_s']:.0f} passages/s |")
    print(f"| schema induction | {r['schema_s']:.2f} | |")
    print(f"| quality of all triples | {r['quality_s']:.1f} | {c['triples'] / r['quality_s']:.0f} triples/s |")
    print(f"| one review (confirm) | {r['review_s']:.4f} | tier {r['review'][0]} -> {r['review'][1]}, "
          f"Q {r['review'][2]} -> {r['review'][3]} |")
    print(f"| one document removed | {r['remove_s']:.3f} | {r['removed_touched']} triples touched |")
    print(f"\ntriples {c['triples']}, entities {c['entities']}, sources {c['sources']}, passages with triples "
          f"{c['passages']}, macro nodes {c['macro_nodes']}")
    tiers = c["tiers"]
    tot = sum(tiers.values())
    print("\n| tier | triples | share |\n|---|---:|---:|")
    for t in ("core", "extended", "exploratory"):
        print(f"| {t} | {tiers.get(t, 0)} | {tiers.get(t, 0) / tot:.1%} |")
    print("\n| relation | triples |\n|---|---:|")
    for rel, n in list(c["relations"].items())[:16]:
        print(f"| {rel} | {n} |")
    print(f"\nsources by extractor: {c['extractors']}")
    lat = r["latency"]
    if lat:
        print(f"\nSubgraph retrieval over {lat['n']} questions (bench/data/ngc_questions.jsonl): linking p50 "
              f"{lat['link_p50']:.1f} ms / p95 {lat['link_p95']:.1f} ms; 2-hop subgraph p50 {lat['sub_p50']:.1f} ms / "
              f"p95 {lat['sub_p95']:.1f} ms; total p50 {lat['total_p50']:.1f} ms / p95 {lat['total_p95']:.1f} ms; "
              f"{lat['linked']} questions linked, {lat['with_triples']} with triples.")


def sample(out: Path, n: int, seed: int = 7, uniform: bool = False):
    """A stratified sample (by tier and extractor) with the source passages, for labelling; with
    ``uniform``, a simple random sample of the unlabelled triples (round 3: its ROC-AUC then
    estimates the whole graph's, not a mix over-weighting the rare core tier)."""
    from medr2.kg.export import triple_records
    from medr2.kg.store import KGStore

    kg = KGStore(OUT / "kg.sqlite")
    texts = sqlite3.connect(str(OUT / "passages.sqlite"))
    done = {json.loads(x)["triple_id"] for f in (LABELS, LABELS2, LABELS3) if f.is_file()
            for x in f.read_text().splitlines() if x.strip()}
    recs = [r for r in triple_records(kg) if r["triple_id"] not in done]  # a new round: unlabelled triples only
    rng = random.Random(seed)
    strata: dict = {}
    for r in recs:
        strata.setdefault((r["tier"], "+".join(r["extractors"])), []).append(r)
    per = 0 if uniform else max(1, n // len(strata))
    chosen = []
    for key in sorted(strata):
        xs = strata[key]
        rng.shuffle(xs)
        chosen += xs[:per]
    rest = [r for r in recs if r not in chosen]
    rng.shuffle(rest)
    chosen += rest[: max(0, n - len(chosen))]
    with open(out, "w", encoding="utf-8") as f:
        for r in chosen:
            srcs = kg.sources(r["triple_id"])
            passages = []
            for t in r["text_ids"][:2]:
                row = texts.execute("SELECT heading, text FROM p WHERE text_id=?", (t,)).fetchone()
                if row:
                    passages.append({"text_id": t, "heading": row[0], "text": row[1]})
            doc = texts.execute("SELECT doc_id FROM p WHERE text_id=?", (r["text_ids"][0],)).fetchone() \
                if r["text_ids"] else None
            # the guideline's title and scope condition, for triples whose condition the passage leaves implicit
            context = [f"{h}: {t}" for h, t in texts.execute(
                "SELECT heading, text FROM p WHERE doc_id=? AND (heading LIKE '%Guideline Title' OR "
                "heading LIKE '%Disease/Condition(s)') LIMIT 3", (doc[0],))] if doc else []
            f.write(json.dumps({"triple_id": r["triple_id"], "head": r["head"], "head_type": r["head_type"],
                                "relation": r["relation"], "tail": r["tail"], "tail_type": r["tail_type"],
                                "extractors": r["extractors"], "statement": srcs[0]["attrs"].get("statement") or
                                srcs[0]["attrs"].get("sentence"), "passages": passages, "guideline": context},
                               ensure_ascii=False) + "\n")
    print(f"wrote {len(chosen)} triples to {out}")


def quality():
    from medr2.kg.quality import roc_auc
    from medr2.kg.store import KGStore

    kg = KGStore(OUT / "kg.sqlite")
    dev = [f for f in (LABELS, LABELS2) if f.is_file()]
    sections = [("rounds 1 and 2 (dev: the quality model's choices are made here)", dev)] if dev else []
    if LABELS3.is_file():  # held out: a uniform sample labelled before any of its scores was looked at
        sections.append(("round 3 (held out; a simple random sample of this graph)", [LABELS3]))
    for name, sel in sections:
        labels = [json.loads(x) for f in sel for x in f.read_text().splitlines() if x.strip()]
        report(kg, labels, name)
    kg.close()


def report(kg, labels, name):
    from medr2.kg.quality import roc_auc

    rows, missing = [], 0
    for lab in labels:
        t = kg.triple(lab["triple_id"])
        if t is None:
            missing += 1
            continue
        srcs = kg.sources(lab["triple_id"])
        rows.append((lab, t, srcs))
    y = [1 if lab["label"] == "correct" else 0 for lab, _, _ in rows]
    print(f"\n### Quality discrimination, {name}: {len(rows)} hand-labelled triples "
          f"({sum(y)} correct, {len(y) - sum(y)} incorrect; {missing} no longer in the graph)\n")
    print("| score | ROC-AUC | paper (shifted test set) |\n|---|---:|---:|")
    paper = {"schema_conf": 0.645, "evid_score": 0.703, "q": 0.748}
    for k, name in (("schema_conf", "SchemaConf"), ("evid_score", "EvidScore"), ("q", "Q(t)")):
        print(f"| {name} | {roc_auc([t[k] for _, t, _ in rows], y):.3f} | {paper[k]} |")
    for w in (0.3, 0.7):
        q = [w * t["schema_conf"] + (1 - w) * t["evid_score"] for _, t, _ in rows]
        print(f"| Q(t) with schema weight {w} | {roc_auc(q, y):.3f} | |")
    print("\n| tier | labelled | correct | precision |\n|---|---:|---:|---:|")
    for tier in ("core", "extended", "exploratory"):
        sel = [yy for (lab, t, _), yy in zip(rows, y) if t["tier"] == tier]
        if sel:
            print(f"| {tier} | {len(sel)} | {sum(sel)} | {sum(sel) / len(sel):.2f} |")
    good = {"exact", "synonym"}
    strict = [yy for (lab, t, srcs), yy in zip(rows, y)
              if t["type_score"] == 1.0 and t["direction_score"] == 1.0
              and any(s["head_level"] in good and s["tail_level"] in good and s["relation_level"] in good for s in srcs)]
    graded = [yy for (lab, t, srcs), yy in zip(rows, y)]
    upper = [yy for (lab, t, srcs), yy in zip(rows, y) if t["tier"] in ("core", "extended")]
    print("\n| policy | triples kept | correct kept | precision |\n|---|---:|---:|---:|")
    print(f"| strict schema hard-filter (types, direction, exact/synonym matches) | {len(strict)} | {sum(strict)} | "
          f"{sum(strict) / max(1, len(strict)):.2f} |")
    print(f"| graded retention (all tiers kept, marked) | {len(graded)} | {sum(graded)} | "
          f"{sum(graded) / max(1, len(graded)):.2f} |")
    print(f"| core + extended only | {len(upper)} | {sum(upper)} | {sum(upper) / max(1, len(upper)):.2f} |")
    by_rel = Counter((t["relation"], yy) for (lab, t, _), yy in zip(rows, y))
    print("\n| relation | correct | incorrect |\n|---|---:|---:|")
    for rel in sorted({t["relation"] for _, t, _ in rows}):
        print(f"| {rel} | {by_rel[(rel, 1)]} | {by_rel[(rel, 0)]} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", nargs="*", default=["build", "quality"], choices=["build", "quality", "sample"])
    ap.add_argument("--limit", type=int, help="Only the first N summaries (a quick run).")
    ap.add_argument("--sample-out", type=Path, default=Path("/tmp/kg_sample.jsonl"))
    ap.add_argument("--sample-n", type=int, default=240)
    ap.add_argument("--sample-seed", type=int, default=7)
    ap.add_argument("--sample-uniform", action="store_true", help="a simple random sample (no tier strata)")
    a = ap.parse_args()
    if not NGC.is_file():
        sys.exit(f"NGC summaries not found at {NGC} (set MEDR2_SHARED_DATA)")
    print(f"## Knowledge graph benchmark - {date.today()} - {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, Python {platform.python_version()}")
    if "build" in a.only:
        print_build(build(a.limit))
    if "sample" in a.only:
        sample(a.sample_out, a.sample_n, a.sample_seed, a.sample_uniform)
    if "quality" in a.only and (LABELS.is_file() or LABELS2.is_file() or LABELS3.is_file()):
        quality()
    elif "quality" in a.only:
        print(f"\n(no labels at {LABELS}: skipped the quality section)")


if __name__ == "__main__":
    main()
