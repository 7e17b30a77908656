"""Does the usefulness prompt's order matter? ``appraise.usefulness_order``: "document_first" (the
paper's conditioning, the default) against "question_first" (the question's KV state kept from one
passage to the next). Dev data only: xmedbench_dev MedQA-USMLE and PubMedQA (seeded :40 subsets,
first N in the answering order), the evaluation index's top 10 after the coarse rerank, the
bundled SmolLM2 proxy with no answer cache.

The reference answer is the gold option's text here, a stand-in for the generator's draft that
the pipeline uses (so no generator call is needed); both orders score the same reference, so the
comparison is of the orders only. Reported: f_u's rank agreement per question (Spearman), whether
the top passage and the top 3 agree, and the proxy's seconds and prompt tokens per question.

    python bench/usefulness_order.py --n 12
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
SHARED = Path(os.environ.get("MEDR2_SHARED_DATA") or ROOT.parent / "shared" / "data")
DEV = SHARED / "benchmarks" / "xmedbench_dev" / "en"


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rho (scipy, average ranks for ties); 0.0 where one side is constant.

    >>> spearman([1, 2, 3], [10, 20, 30]), spearman([1, 2, 3], [3, 2, 1]), spearman([0, 0, 0], [1, 2, 3])
    (1.0, -1.0, 0.0)
    """
    import math

    from scipy.stats import spearmanr

    if len(set(a)) < 2 or len(set(b)) < 2:
        return 0.0
    rho = float(spearmanr(a, b).statistic)
    return 0.0 if math.isnan(rho) else round(rho, 12)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=12, help="questions per dev set")
    ap.add_argument("--sets", default="medqa-usmle,pubmedqa")
    ap.add_argument("--index", type=Path, default=ROOT / "bench" / "out" / "eval" / "index")
    ap.add_argument("--k", type=int, default=10)
    args = ap.parse_args()
    from medr2.appraise.usefulness import UsefulnessScorer
    from medr2.config import Config
    from medr2.eval.datasets import load_xmedbench
    from medr2.eval.runner import answer_order, subset
    from medr2.index.index import Index
    from medr2.llm.factory import load_llm
    from medr2.pipelines.engine import Engine

    cfg = Config()
    proxy = load_llm(cfg.llm.scorer, cfg.llm, None)  # no answer cache: every call runs
    index = Index.open(args.index)
    engine = Engine(index, index.config, generator=None, scorer=None)  # retrieval and the coarse rerank only
    rows = []
    for name in args.sets.split(","):
        qs = answer_order(subset(list(load_xmedbench(DEV / f"{name}.jsonl")), 40, 0), 0)[: args.n]
        for qi, q in enumerate(qs):
            hits = engine.rerank(q.question, engine.retrieve(q.question, 30), args.k, [])
            texts = [h.text for h in hits]
            reference = q.options.get(q.answer[:1], q.answer)
            res = {}
            # alternate which order runs first, so neither always finds the other's KV state
            for qf in ((False, True) if qi % 2 == 0 else (True, False)):
                before = proxy.usage.prompt_tokens
                t = time.perf_counter()
                base, fu = UsefulnessScorer(proxy, cfg.appraise.usefulness_passage_tokens, qf).score(
                    q.question, q.options, texts, reference)
                sec = time.perf_counter() - t
                res[qf] = (fu, sec, proxy.usage.prompt_tokens - before)
            (fa, sa, ta), (fb, sb, tb) = res[False], res[True]
            top = lambda f: sorted(range(len(f)), key=lambda i: -f[i])
            rows.append(dict(set=name, id=q.id, rho=spearman(fa, fb), top1=top(fa)[0] == top(fb)[0],
                             top3=len(set(top(fa)[:3]) & set(top(fb)[:3])), sa=sa, sb=sb, ta=ta, tb=tb))
            print(f"{name} {q.id}: rho {rows[-1]['rho']:.2f}, top1 same {rows[-1]['top1']}, top3 overlap "
                  f"{rows[-1]['top3']}/3, seconds {sa:.1f} / {sb:.1f}, prompt tokens {ta} / {tb}", flush=True)
    engine.close()
    print("\n| set | questions | median rho | top passage the same | mean top-3 overlap | s document_first | "
          "s question_first | prompt tokens evaluated d / q |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for name in [*args.sets.split(","), "all"]:
        g = [r for r in rows if name in ("all", r["set"])]
        print(f"| {name} | {len(g)} | {statistics.median(r['rho'] for r in g):.2f} | {sum(r['top1'] for r in g)}/{len(g)} "
              f"| {statistics.mean(r['top3'] for r in g):.2f} | {statistics.mean(r['sa'] for r in g):.1f} "
              f"| {statistics.mean(r['sb'] for r in g):.1f} | {statistics.mean(r['ta'] for r in g):.0f} / "
              f"{statistics.mean(r['tb'] for r in g):.0f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
