"""Benchmarks of the Med-R2 pipeline (issue 3) on ../shared/data; prints markdown tables.

Sections (``--only`` picks some):

* ``classifier`` - EBM category accuracy of the offline classifier on held-out MedQuAD questions
  (split by document, as trained) and on 84 hand-written clinical questions
  (bench/data/ebm_questions_handwritten.jsonl), with its confidence-threshold sweep; question-type
  cue rules on the hand-written set; the LLM classifier (bundled Qwen) on the same hand-written
  questions and a fixed sample of the held-out MedQuAD questions.
* ``levels`` - evidence-level detector on 80 hand-labelled PubMedQA abstracts
  (bench/data/evidence_levels_pubmedqa.jsonl): text cues alone, and cues with the LLM as fallback.
* ``retrieval`` - nDCG@10 / Recall@10 of plain hybrid search versus the Med-R2 formulation and
  appraisal stages (offline reformulation; fine rerank F = f_h * f_g over a coarse set of 20: the
  paper's order by F, and medr2's relevance order logit(relevance) + w ln F with and without the
  relevance floor, ``appraise.order``) on the core retrieval benchmark's corpus (small scale).
* ``latency`` - per-stage seconds, calls and tokens of ``medr2`` on demo questions with the bundled
  Qwen2.5-1.5B generator and SmolLM2 scorer on this machine; share of time outside the LLM.

Usage::

    python bench/pipeline.py                       # everything (~45 minutes on 2 cores)
    python bench/pipeline.py --only classifier levels --llm-sample 20
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import random
import sys
import tempfile
import time
from collections import Counter
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from medr2.config import Config  # noqa: E402

DATA = Path(os.environ.get("MEDR2_SHARED_DATA", ROOT.parent / "shared" / "data"))
HERE = Path(__file__).parent
OUT = HERE / "out"


def table(rows: list[list], header: list[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines)


def load_generator(spec: str, cache_dir: Path):
    from medr2.llm.cache import LLMCache
    from medr2.llm.factory import load_llm

    cfg = Config().llm
    cfg.n_ctx = 4096
    return load_llm(spec, cfg, LLMCache(cache_dir / "llm-cache.sqlite"))


# -- classifier --------------------------------------------------------------------------------
def bench_classifier(args, results: dict) -> None:
    from medr2.formulate.classify import LLMClassifier, OfflineClassifier, question_type_by_cues
    from medr2.formulate.train import held_out
    from medr2.llm.base import LLMError

    off = OfflineClassifier.load()
    mq = held_out(DATA / "corpora" / "medquad" / "medquad.jsonl")
    hw = [json.loads(x) for x in (HERE / "data" / "ebm_questions_handwritten.jsonl").read_text().splitlines() if x]
    acc_mq = sum(off.classify(q).ebm_category == y for q, y in mq) / len(mq)
    acc_hw = sum(off.classify(r["question"]).ebm_category == r["ebm_category"] for r in hw) / len(hw)
    qt_hw = sum(question_type_by_cues(r["question"]) == r["question_type"] for r in hw) / len(hw)
    sweep = [[th if th <= 1 else "cues always", round(sum(off.classify(r["question"], th).ebm_category ==
                                                          r["ebm_category"] for r in hw) / len(hw), 3)]
             for th in (0.0, 0.6, 0.8, 0.9, 1.01)]
    res = {"offline_medquad_heldout": {"n": len(mq), "accuracy": round(acc_mq, 4)},
           "offline_handwritten": {"n": len(hw), "accuracy": round(acc_hw, 4)},
           "question_type_rules_handwritten": round(qt_hw, 4), "threshold_sweep": sweep}
    rng = random.Random(7)
    sample = rng.sample(mq, min(args.llm_sample, len(mq)))
    if not args.skip_llm:
        gen = load_generator(args.llm, args.cache_dir)
        clf = LLMClassifier(gen)

        def run(items):
            ok = qt = fail = 0
            t = time.perf_counter()
            for q, y, ty in items:
                try:
                    c = clf.classify(q)
                except LLMError:
                    fail += 1
                    continue
                ok += c.ebm_category == y
                qt += ty is not None and c.question_type == ty
            return ok / len(items), qt / len(items), fail, (time.perf_counter() - t) / len(items)

        a, b, f, s = run([(r["question"], r["ebm_category"], r["question_type"]) for r in hw])
        res["llm_handwritten"] = {"n": len(hw), "accuracy": round(a, 4), "question_type": round(b, 4),
                                  "failures": f, "s_per_question": round(s, 2)}
        a, _, f, s = run([(q, y, None) for q, y in sample])
        off_s = sum(off.classify(q).ebm_category == y for q, y in sample) / len(sample)
        res["llm_medquad_sample"] = {"n": len(sample), "accuracy": round(a, 4), "offline_on_same": round(off_s, 4),
                                     "failures": f, "s_per_question": round(s, 2)}
    results["classifier"] = res
    rows = [["offline (MedQuAD-trained + cues)", f"held-out MedQuAD ({len(mq)})", res["offline_medquad_heldout"]["accuracy"]],
            ["offline (MedQuAD-trained + cues)", f"hand-written ({len(hw)})", res["offline_handwritten"]["accuracy"]]]
    if "llm_handwritten" in res:
        rows += [[f"LLM ({args.llm})", f"hand-written ({len(hw)})", res["llm_handwritten"]["accuracy"]],
                 [f"LLM ({args.llm})", f"MedQuAD held-out sample ({len(sample)})", res["llm_medquad_sample"]["accuracy"]],
                 ["offline", f"same MedQuAD sample ({len(sample)})", res["llm_medquad_sample"]["offline_on_same"]]]
    print("\n### EBM category classification\n")
    print(table(rows, ["classifier", "questions", "accuracy"]))
    print(f"\nQuestion type (12 types), hand-written set: cue rules {qt_hw:.3f}"
          + (f"; LLM {res['llm_handwritten']['question_type']:.3f}" if "llm_handwritten" in res else ""))
    print("\nOffline confidence threshold (below it the category cue terms decide), hand-written set:\n")
    print(table(sweep, ["min confidence", "accuracy"]))


# -- evidence levels ---------------------------------------------------------------------------
def bench_levels(args, results: dict) -> None:
    from medr2.appraise.evidence_level import EvidenceLeveler

    lab = [json.loads(x) for x in (HERE / "data" / "evidence_levels_pubmedqa.jsonl").read_text().splitlines() if x]
    pq = json.loads((DATA / "benchmarks" / "pubmedqa" / "ori_pqal.json").read_text())
    levels = Config().appraise.levels
    out = {}
    variants = [("text cues", None)]
    if not args.skip_llm:
        variants.append((f"text cues + LLM fallback ({args.llm})", load_generator(args.llm, args.cache_dir)))
    rows = []
    for name, llm in variants:
        lv = EvidenceLeveler(levels, 9, llm)
        exact = level_ok = decided = 0
        t = time.perf_counter()
        conf = Counter()
        for r in lab:
            e = lv.assess("paper", [], "", " ".join(pq[r["pmid"]]["CONTEXTS"]))
            gold_level = levels.get(r["design"], 9)
            exact += e.design == r["design"]
            level_ok += e.level == gold_level
            decided += e.source != "default"
            conf[(r["design"], e.design)] += 1
        n = len(lab)
        out[name] = {"n": n, "design_accuracy": round(exact / n, 4), "level_accuracy": round(level_ok / n, 4),
                     "decided": round(decided / n, 4), "seconds": round(time.perf_counter() - t, 1),
                     "confusions": [[g, p, c] for (g, p), c in conf.most_common(12)]}
        rows.append([name, n, out[name]["design_accuracy"], out[name]["level_accuracy"], out[name]["decided"]])
    results["levels"] = out
    print("\n### Evidence-level detector (80 hand-labelled PubMedQA abstracts, metadata withheld)\n")
    print(table(rows, ["detector", "abstracts", "design accuracy", "level accuracy", "share decided"]))


# -- retrieval ---------------------------------------------------------------------------------
def bench_retrieval(args, results: dict) -> None:
    """Coarse sets are computed once per query and formulation; the fine orders are then pure
    functions of the stored factors, so every variant is scored on the same candidates."""
    spec = importlib.util.spec_from_file_location("bench_retrieval", HERE / "retrieval.py")
    br = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(br)
    from medr2.appraise.appraiser import base_rows
    from medr2.appraise.doc_type import EmbeddingDocTyper, doc_type_fit
    from medr2.appraise.fine import fine_score
    from medr2.appraise.order import relevance_order
    from medr2.util.retrieval_metrics import mean, ndcg_at_k, recall_at_k
    from medr2.formulate.classify import question_type_by_cues
    from medr2.pipelines import Engine

    work = Path(tempfile.mkdtemp(prefix="medr2-bench-pipe-"))
    gold = br.build_corpus(br.SCALES[args.scale], work / "corpus")
    idx, secs, n = br.timed_ingest(work / "index", work / "corpus", Config())
    idx.close()
    print(f"\nretrieval corpus: {n} passages ingested in {secs:.0f} s", file=sys.stderr)
    c = Config()
    c.formulate.method = "offline"
    e = Engine.open(work / "index", c, generator="none", scorer="none")
    typer = EmbeddingDocTyper(e.index.encoder, c.appraise.doc_type_temperature)
    expected = c.appraise.expected_doc_types
    w, floor = c.appraise.relevance_weight, c.appraise.relevance_floor
    rel_v, floor_v = f"relevance order (w = {w})", f"relevance order (w = {w}) + floor {floor}"
    variants = ["hybrid (coarse order)", "paper F, unknown e = 9", "F, unknown e = 5", rel_v, floor_v]
    scored_hits = total_hits = 0

    def rel_orders(idxs, rws, fg):
        """The relevance order of the rows at ``idxs`` (F with f_u = 0), and it without the rows
        under the floor (rows without a relevance score keep their coarse place and are not cut)."""
        ranked = relevance_order([rws[i].model_copy(update={"F": fine_score(rws[i].f_h, fg[i], 0.0)})
                                  for i in idxs], w)
        order = [r.coarse_rank - 1 for r in ranked]
        return order, [i for i in order if rws[i].relevance is None or rws[i].relevance >= floor]

    out, rows = {}, []
    for task, queries in gold.items():
        for reform in (False, True):
            scores = {v: {k: ([], []) for k in (10, 20)} for v in variants}
            t_fine = 0.0
            for qtext, gold_doc in queries[: args.queries]:
                gold_rows = br.gold_rows(e.index, gold_doc)
                if not gold_rows:
                    continue
                cls = e.formulator.offline_classifier.classify(qtext)
                q = e.formulator.offline_reformulator.reformulate(qtext, cls.ebm_category).query if reform else qtext
                # as the pipelines do: a reformulation expands retrieval (fused with the question's
                # own pool) and the coarse reranker reads the question
                hits = e.rerank(qtext, e.retrieve([q, qtext] if q != qtext else [q], 20), 20, [])
                t = time.perf_counter()
                rws = base_rows(hits, e.leveler)
                vec = e.searcher.vectors(hits) if hits else None
                dists = typer.distributions([h.text for h in hits], vec) if hits else []
                exp = expected[question_type_by_cues(qtext)]
                fg = [doc_type_fit(d, exp) for d in dists]
                t_fine += time.perf_counter() - t
                rowid = [e.index.store.rowid_of(h.passage_id) for h in hits]
                scored_hits += sum(r.relevance is not None for r in rws)
                total_hits += len(rws)
                for k in (10, 20):
                    idxs = list(range(min(k, len(hits))))
                    rel_order, floored = rel_orders(idxs, rws, fg)
                    orders = {
                        "hybrid (coarse order)": idxs,
                        "paper F, unknown e = 9": sorted(idxs, key=lambda i: -fine_score(rws[i].f_h, fg[i], 0.0)),
                        "F, unknown e = 5": sorted(idxs, key=lambda i: -fine_score(
                            10 - (5 if rws[i].level_source == "default" else rws[i].level), fg[i], 0.0)),
                        rel_v: rel_order,
                        floor_v: floored,
                    }
                    for v, order in orders.items():
                        ranked = [rowid[i] for i in order][:10]
                        scores[v][k][0].append(recall_at_k(ranked, gold_rows, 10))
                        scores[v][k][1].append(ndcg_at_k(ranked, gold_rows, 10))
            nq = len(scores[variants[0]][10][0])
            for v in variants:
                for k in (10, 20):
                    if v.startswith("hybrid") and k == 20:
                        continue
                    rec, nd = mean(scores[v][k][0]), mean(scores[v][k][1])
                    name = f"{'reformulated' if reform else 'question'} / {v}" + ("" if v.startswith("hybrid") else f" / coarse k = {k}")
                    out.setdefault(task, {})[name] = {"recall@10": round(rec, 4), "ndcg@10": round(nd, 4), "n": nq}
                    rows.append([task, "offline reformulation" if reform else "question", v,
                                 "-" if v.startswith("hybrid") else k, f"{rec:.3f}", f"{nd:.3f}"])
            out[task][f"fine_ms_per_query{'_reformulated' if reform else ''}"] = round(t_fine / max(nq, 1) * 1000, 1)
    reranker = e.model_names()["coarse_reranker"]
    e.close()
    out["coarse_reranker"] = {"name": reranker, "hits_with_relevance": scored_hits, "hits": total_hits}
    results["retrieval"] = out
    print(f"\n### Retrieval: plain hybrid vs Med-R2 formulation and appraisal ({args.scale} scale, {n} passages, "
          f"{args.queries} queries per task)\n")
    print(f"F here has f_u = 0 (usefulness needs a generator's draft answer); coarse order = {reranker}'s order "
          f"(the rerank config in effect); {scored_hits} of {total_hits} coarse hits carry a relevance score"
          + (" (none: the relevance order is the coarse order)" if not scored_hits else "") + ".\n")
    print(table(rows, ["task", "query", "order", "coarse k", "Recall@10", "nDCG@10"]))
    print("\nFine-stage cost (levels, stored vectors, document types, F): "
          + ", ".join(f"{t} {out[t]['fine_ms_per_query']:.0f} ms/query" for t in gold))


# -- latency -----------------------------------------------------------------------------------
def bench_latency(args, results: dict) -> None:
    from medr2.demo import CORPUS, demo_config, questions
    from medr2.index.index import Index
    from medr2.ingest.pipeline import ingest
    from medr2.pipelines import Engine, Pipeline

    work = Path(tempfile.mkdtemp(prefix="medr2-bench-lat-"))
    with Index.open(work / "index", create=True, writable=True) as idx:
        ingest(idx, [CORPUS], progress=False)
    cfg = demo_config()
    cfg.llm.cache_path = str(work / "fresh-cache.sqlite")  # nothing cached: real cost
    if args.prefix_cache_mb is not None:
        cfg.llm.prefix_cache_mb = args.prefix_cache_mb
    e = Engine.open(work / "index", cfg, generator=args.llm)
    out = []
    stages: dict[str, dict[str, float]] = {}
    for q in questions()[: args.latency_questions]:
        res = Pipeline(e, "medr2").run(q["question"])
        u = res.usage
        out.append({"question": q["question"], "wall_seconds": u["wall_seconds"], "llm_seconds": u["llm_seconds"],
                    "outside_llm_share": u["outside_llm_share"], "calls": u["calls"],
                    "prompt_tokens": u["prompt_tokens"], "reused_tokens": u.get("reused_tokens", 0),
                    "completion_tokens": u["completion_tokens"],
                    "rounds": len(res.rounds), "stages": u["stages"]})
        for name, st in u["stages"].items():
            agg = stages.setdefault(name, Counter())
            for k, v in st.items():
                agg[k] += v
    e.close()
    nq = len(out)
    results["latency"] = {"config": {"coarse_k": cfg.appraise.coarse_k, "context_tokens": cfg.apply.context_tokens,
                                     "max_rounds": cfg.assess.max_rounds, "few_shot": cfg.apply.few_shot,
                                     "prefix_cache_mb": cfg.llm.prefix_cache_mb},
                          "questions": out}
    print(f"\n### Per-stage latency, medr2 pipeline, {args.llm} generator + SmolLM2 scorer, {nq} demo questions\n")
    print(f"Demo budget: coarse k {cfg.appraise.coarse_k}, context {cfg.apply.context_tokens} tokens, "
          f"T = {cfg.assess.max_rounds}, {cfg.apply.few_shot} CoT demonstration; no call cached; "
          f"llm.prefix_cache_mb {cfg.llm.prefix_cache_mb}.\n")
    rows = [[name, f"{st['seconds'] / nq:.2f}", f"{st['llm_seconds'] / nq:.2f}", f"{st['calls'] / nq:.1f}",
             f"{st['prompt_tokens'] / nq:.0f}", f"{st.get('reused_tokens', 0) / nq:.0f}",
             f"{st['completion_tokens'] / nq:.0f}",
             f"{(st['prompt_tokens'] - st.get('reused_tokens', 0)) / st['llm_seconds']:.1f}" if st['llm_seconds'] else ""]
            for name, st in stages.items()]
    print(table(rows, ["stage", "s/question", "LLM s/question", "calls", "prompt tokens", "reused from KV cache",
                       "completion tokens", "prefilled tokens per LLM second"]))
    wall = sum(x["wall_seconds"] for x in out) / nq
    total = sum(st["seconds"] for st in stages.values())
    llm = sum(st["llm_seconds"] for st in stages.values())
    print(f"\nMean {wall:.1f} s per question, rounds {[x['rounds'] for x in out]}; time outside the LLM: "
          f"{(total - llm) / total:.1%} (target < 15%).")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", nargs="*", default=["classifier", "levels", "retrieval", "latency"])
    ap.add_argument("--llm", default="bundled:qwen2.5-1.5b")
    ap.add_argument("--skip-llm", action="store_true", help="Offline parts only.")
    ap.add_argument("--llm-sample", type=int, default=30, help="MedQuAD held-out questions for the LLM classifier.")
    ap.add_argument("--latency-questions", type=int, default=3)
    ap.add_argument("--prefix-cache-mb", type=int, default=None,
                    help="llm.prefix_cache_mb for the latency section (0: keep only the last prompt's state)")
    ap.add_argument("--scale", default="small", choices=["small", "default"])
    ap.add_argument("--queries", type=int, default=150, help="Retrieval queries per task.")
    ap.add_argument("--cache-dir", type=Path, default=OUT / "cache")
    args = ap.parse_args()
    if not DATA.exists():
        print(f"needs {DATA} (../shared/data)", file=sys.stderr)
        return 2
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    print(f"Date {date.today().isoformat()}; machine: {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}")
    results: dict = {"date": date.today().isoformat(), "cores": os.cpu_count()}
    for name in args.only:
        {"classifier": bench_classifier, "levels": bench_levels, "retrieval": bench_retrieval,
         "latency": bench_latency}[name](args, results)
        sys.stdout.flush()
    OUT.mkdir(exist_ok=True)
    (OUT / f"pipeline-{date.today().isoformat()}.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
