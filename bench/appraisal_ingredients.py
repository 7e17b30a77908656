"""Accuracy of the appraisal ingredients (issue 34, section 3) on hand-labelled sets; prints
markdown tables.

* ``doctypes`` - document-type distribution (f_g): top-1 / top-3 accuracy of the zero-shot
  EmbeddingDocTyper and the TrainedDocTyper on bench/data/doc_types_labelled.jsonl (passages of
  documents held out from training, labelled by reading them before either typer ran on them),
  and the mean f_g of each labelled type's expected question types.
* ``levels`` - study design and evidence level of the cue detector (``appraise.level_method =
  "cues"``) and the trained one on the 80 hand-labelled PubMedQA abstracts
  (bench/data/evidence_levels_pubmedqa.jsonl), metadata withheld: design exact, level exact and
  level within one.

The labelled set holds identifiers only; passages are rebuilt from ../shared/data with medr2's
loaders and segmenter (``draw`` re-creates the candidate list it was labelled from).

Usage::

    python bench/appraisal_ingredients.py                    # both reports (~30 s on 2 cores)
    python bench/appraisal_ingredients.py --only levels
    python bench/appraisal_ingredients.py draw --out /tmp/draft.jsonl   # the candidates, with text
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

DATA = Path(os.environ.get("MEDR2_SHARED_DATA", ROOT.parent / "shared" / "data"))
HERE = Path(__file__).parent
DOC_TYPES_SET = HERE / "data" / "doc_types_labelled.jsonl"
LEVELS_SET = HERE / "data" / "evidence_levels_pubmedqa.jsonl"

# The draw: (corpus, passages, which passages qualify), one passage per document, documents
# held out from training only (pubmed299 and nice are never trained on for document types).
DRAW_SEED = 34
DRAW_PLAN = [("pubmedqa", 24), ("pubmed299", 12), ("ngc", 20), ("nice", 10), ("openstax", 24),
             ("medquad", 14), ("medlineplus", 10), ("case_reports", 6)]


def table(rows: list[list], header: list[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def se(p: float, n: int) -> str:
    """p with its binomial standard error, sqrt(p(1-p)/n)."""
    return f"{p:.3f} ± {(p * (1 - p) / n) ** 0.5:.3f}"


def _qualifies(corpus: str, unit) -> bool:
    from medr2.appraise.weak_labels import _EXERCISE, NGC_FIELD_TYPES

    path = unit.passage.heading_path
    if corpus == "ngc":
        return bool(path) and path[-1] in NGC_FIELD_TYPES  # content fields, not bibliographic ones
    if corpus == "openstax":
        return not _EXERCISE.search(unit.passage.text) and "preface" not in unit.doc.title.lower()
    return True


def candidates(corpus: str):
    """Passages of the held-out documents of one corpus (every document for the corpora never
    trained on), in a fixed order."""
    from medr2.appraise.weak_labels import heldout, units

    never_trained = corpus in ("pubmed299", "nice")
    return [u for u in units(DATA, corpus, keep=lambda d: never_trained or heldout(d.doc_id))
            if _qualifies(corpus, u)]


def draw(out: Path) -> None:
    rng = random.Random(DRAW_SEED)
    rows = []
    for corpus, n in DRAW_PLAN:
        pool = candidates(corpus)
        by_doc: dict[str, list] = defaultdict(list)
        for u in pool:
            by_doc[u.group].append(u)
        docs = sorted(by_doc)
        rng.shuffle(docs)
        for d in docs[:n]:
            u = rng.choice(by_doc[d])
            rows.append({"corpus": corpus, "doc_id": u.doc.doc_id, "passage_id": u.passage.passage_id,
                         "heading_path": u.passage.heading_path, "title": u.doc.title, "text": u.passage.text})
        print(f"{corpus}: {len(pool)} candidate passages in {len(by_doc)} documents, drew {min(n, len(docs))}",
              file=sys.stderr)
    out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    print(f"wrote {len(rows)} candidates to {out}", file=sys.stderr)


# -- document types ------------------------------------------------------------------------------
GROUPS = {"pubmedqa": "PubMed abstracts", "pubmed299": "PubMed abstracts", "ngc": "guidelines", "nice": "guidelines",
          "openstax": "textbooks", "medquad": "consumer health", "medlineplus": "consumer health",
          "case_reports": "case reports"}


def labelled_passages() -> list[tuple[dict, object]]:
    """(label row, unit) for each labelled passage, rebuilt from the shared data."""
    rows = [json.loads(x) for x in DOC_TYPES_SET.read_text("utf-8").splitlines() if x.strip()]
    found = {}
    for corpus in sorted({r["corpus"] for r in rows}):
        want = {r["passage_id"] for r in rows if r["corpus"] == corpus}
        found.update({u.passage.passage_id: u for u in candidates(corpus) if u.passage.passage_id in want})
    missing = [r["passage_id"] for r in rows if r["passage_id"] not in found]
    if missing:
        sys.exit(f"{len(missing)} labelled passages not found in {DATA} (other data or segmentation?): {missing[:5]}")
    return [(r, found[r["passage_id"]]) for r in rows]


def bench_doctypes(results: dict) -> None:
    import numpy as np

    from medr2.appraise.doc_type import DocTypeModel, EmbeddingDocTyper, TrainedDocTyper, doc_type_fit
    from medr2.config import Config, DenseConfig
    from medr2.index.dense import load_encoder

    cfg = Config().appraise
    pairs = labelled_passages()
    enc = load_encoder(DenseConfig())
    t = time.perf_counter()
    vecs = np.asarray(enc.encode_passages([u.embedding_text() for _, u in pairs]), dtype=np.float32)
    print(f"embedded {len(pairs)} labelled passages in {time.perf_counter() - t:.0f} s", file=sys.stderr)
    typers = {"zero-shot embedding (before)": EmbeddingDocTyper(enc, cfg.doc_type_temperature),
              "trained (default)": TrainedDocTyper(DocTypeModel.load(cfg.doc_type_model), enc)}
    gold = [r["doc_type"] for r, _ in pairs]
    groups = [GROUPS[r["corpus"]] for r, _ in pairs]
    expected = cfg.expected_doc_types
    out, rows, by_group, fit_rows = {}, [], [], []
    for name, typer in typers.items():
        dists = typer.distributions([u.passage.text for _, u in pairs], vecs)
        ranked = [sorted(d, key=d.get, reverse=True) for d in dists]
        top1 = [rk[0] == g for rk, g in zip(ranked, gold)]
        top3 = [g in rk[:3] for rk, g in zip(ranked, gold)]
        pred = Counter(rk[0] for rk in ranked)
        errors = Counter((g, rk[0]) for rk, g in zip(ranked, gold) if rk[0] != g)
        # f_g: question types whose expected list holds the gold type vs those whose list does not
        match = [doc_type_fit(d, e) for d, g in zip(dists, gold) for e in expected.values() if g in e]
        other = [doc_type_fit(d, e) for d, g in zip(dists, gold) for e in expected.values() if g not in e]
        out[name] = {"n": len(gold), "top1": round(sum(top1) / len(gold), 4), "top3": round(sum(top3) / len(gold), 4),
                     "predicted": dict(pred.most_common()),
                     "f_g_matching": round(float(np.mean(match)), 4), "f_g_not_matching": round(float(np.mean(other)), 4),
                     "by_group": {}, "errors": [[g, p, c] for (g, p), c in errors.most_common(10)]}
        rows.append([name, len(gold), se(out[name]["top1"], len(gold)), se(out[name]["top3"], len(gold)), len(pred)])
        fit_rows.append([name, out[name]["f_g_matching"], out[name]["f_g_not_matching"],
                         round(out[name]["f_g_matching"] - out[name]["f_g_not_matching"], 4)])
        for grp in dict.fromkeys(GROUPS.values()):
            idx = [i for i, x in enumerate(groups) if x == grp]
            a1, a3 = sum(top1[i] for i in idx) / len(idx), sum(top3[i] for i in idx) / len(idx)
            out[name]["by_group"][grp] = {"n": len(idx), "top1": round(a1, 4), "top3": round(a3, 4)}
            by_group.append([name, grp, len(idx), round(a1, 3), round(a3, 3)])
    majority = Counter(gold).most_common(1)[0]
    results["doc_types"] = out
    print(f"\n### Document types (f_g): {len(gold)} hand-labelled passages (bench/data/doc_types_labelled.jsonl)\n")
    print(table(rows, ["typer", "passages", "top-1", "top-3", "types predicted"]))
    print(f"\nMost frequent gold type ({majority[0]}) alone: top-1 {majority[1] / len(gold):.3f}; "
          "a uniform guess: top-3 0.188.\n")
    print(table(by_group, ["typer", "source", "passages", "top-1", "top-3"]))
    print("\nMean f_g over the question types whose expected document types include the passage's gold type "
          "(matching) and over the others:\n")
    print(table(fit_rows, ["typer", "f_g matching", "f_g not matching", "difference"]))
    for name, o in out.items():
        print(f"\n{name}: most frequent errors (gold -> predicted): "
              + "; ".join(f"{g} -> {p} ({c})" for g, p, c in o["errors"][:6]))


# -- evidence levels -----------------------------------------------------------------------------
def bench_levels(results: dict) -> None:
    from medr2.appraise.design_model import DesignModel
    from medr2.appraise.evidence_level import EvidenceLeveler
    from medr2.config import Config

    cfg = Config().appraise
    lab = [json.loads(x) for x in LEVELS_SET.read_text("utf-8").splitlines() if x.strip()]
    pq = json.loads((DATA / "benchmarks" / "pubmedqa" / "ori_pqal.json").read_text("utf-8"))
    model = DesignModel.load(cfg.design_model)
    variants = {
        'cues (level_method = "cues", before)': EvidenceLeveler(cfg.levels, cfg.unknown_level),
        f'trained (default; model >= {cfg.design_min_confidence:g}, else cues, else model)':
            EvidenceLeveler.from_config(cfg.model_copy(update={"level_method": "trained", "level_llm": False})),
        "model at any confidence (not chosen; for reference)": EvidenceLeveler(cfg.levels, cfg.unknown_level,
                                                                               design_model=model, min_confidence=0.0),
    }
    out, rows = {}, []
    for name, lv in variants.items():
        exact = level_ok = near = decided = 0
        conf, sources = Counter(), Counter()
        for r in lab:
            e = lv.assess("paper", [], "", " ".join(pq[r["pmid"]]["CONTEXTS"]))
            gold = cfg.levels.get(r["design"], cfg.unknown_level)
            exact += e.design == r["design"]
            level_ok += e.level == gold
            near += abs(e.level - gold) <= 1
            decided += e.source != "default"
            sources[e.source] += 1
            if e.design != r["design"]:
                conf[(r["design"], e.design)] += 1
        n = len(lab)
        out[name] = {"n": n, "design": round(exact / n, 4), "level": round(level_ok / n, 4),
                     "level_within_1": round(near / n, 4), "decided": round(decided / n, 4), "sources": dict(sources),
                     "errors": [[g, p, c] for (g, p), c in conf.most_common(8)]}
        rows.append([name, n, se(exact / n, n), se(level_ok / n, n), se(near / n, n), out[name]["decided"]])
    results["levels"] = out
    print(f"\n### Study design and evidence level: {len(lab)} hand-labelled PubMedQA abstracts, metadata withheld\n")
    print(table(rows, ["detector", "abstracts", "design exact", "level exact", "level within 1", "share decided"]))
    for name, o in out.items():
        print(f"\n{name}: sources {o['sources']}; most frequent errors (gold -> predicted): "
              + "; ".join(f"{g} -> {p} ({c})" for g, p, c in o["errors"][:5]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", nargs="?", default="report", choices=["report", "draw"])
    ap.add_argument("--out", type=Path, default=None, help="draw: where to write the candidates (with text)")
    ap.add_argument("--only", nargs="*", default=["doctypes", "levels"])
    args = ap.parse_args()
    if not DATA.is_dir():
        sys.exit(f"needs the shared data folder at {DATA} (set MEDR2_SHARED_DATA)")
    if args.command == "draw":
        draw(args.out or Path("doc_types_candidates.jsonl"))
        return
    results: dict = {}
    t = time.perf_counter()
    for section in args.only:
        {"doctypes": bench_doctypes, "levels": bench_levels}[section](results)
    results["seconds"] = round(time.perf_counter() - t, 1)
    out = HERE / "out"
    out.mkdir(exist_ok=True)
    (out / "appraisal_ingredients.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\n({results['seconds']} s; results in bench/out/appraisal_ingredients.json)")


if __name__ == "__main__":
    main()
