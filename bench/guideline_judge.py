"""The generator as the judge of which guideline statements apply (issue 36;
``recommend.llm_answer = "quote"``, medr2.apply.judge): scored, chosen on dev, reported.

    python bench/guideline_judge.py score    # P("yes") of every statement of the collected dev rows (resumable)
    python bench/guideline_judge.py grid     # the judge_* selection chosen on dev by replay; writes the table
    python bench/guideline_judge.py report   # medr2 eval trust --llm local in quote mode, passage mode, report split
    python bench/guideline_judge.py modes    # write against quote, product runs on the dev split (the default's choice)

``score`` reads the dev rows that ``bench/guideline.py collect --dev-only --tag=-s24`` stored
(each statement with its section heading) and asks the bundled generator, through the product's
:class:`medr2.apply.judge.StatementJudge` and the trust index's model cache, about each statement;
``grid`` replays :meth:`medr2.apply.recommend.Recommender.choose` with the judge's half in place
of the cross-encoder's, over the same objective as ``bench/guideline.py grid`` (omission +
(1 - precision) + conflicts, then fewer items). The report split is never read by ``score`` or
``grid``; ``report`` is the product run on it.
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import guideline as G  # noqa: E402

ROWS = G.OUT / "cands-passage-s24.jsonl"  # dev rows with each statement's section (collect --tag=-s24)
SCORES = G.RESULTS / "guideline-judge" / "dev-scores.jsonl"
SPACE = {"judge_overlap_weight": [0.0, 0.25, 0.5, 0.75], "judge_min_relevance": [0.0, 0.2, 0.4, 0.5, 0.6, 0.7],
         "judge_keep_ratio": [0.0, 0.5, 0.7, 0.85, 0.9, 0.95], "judge_max_items": [2, 3, 4, 5],
         "judge_one_guideline": [False, True]}


def dev_rows() -> list[dict]:
    if not ROWS.exists():
        raise SystemExit(f"{ROWS} is missing: run python bench/guideline.py collect --dev-only --tag=-s24 first")
    return [r for r in G.load(ROWS) if r["dev"]]


def score(args) -> None:
    from eval import trust_index

    from medr2.apply.recommend import with_section
    from medr2.config import Config
    from medr2.pipelines.engine import Engine

    cfg = Config.load(ROOT / "bench" / "eval.toml")
    cfg.recommend.llm_answer = "quote"
    engine = Engine.open(trust_index(), cfg, generator="local")
    judge = engine.recommender.judge
    SCORES.parent.mkdir(parents=True, exist_ok=True)
    done = {json.loads(x)["id"] for x in SCORES.read_text().splitlines()} if SCORES.exists() else set()
    rows = [r for r in dev_rows() if not r["unanswerable"] and r["id"] not in done]
    t0 = time.perf_counter()
    with open(SCORES, "a", encoding="utf-8") as out:
        for i, r in enumerate(rows, 1):
            p = judge(r["question"], [with_section(x.get("section"), x["statement"]) for x in r["cands"]])
            out.write(json.dumps({"id": r["id"], "judge": [round(float(v), 6) for v in p]}) + "\n")
            out.flush()
            print(f"{i}/{len(rows)} {r['id']}: {len(p)} statements ({time.perf_counter() - t0:.0f} s)", flush=True)
    engine.close()


def judged(rows: list[dict], scores: dict[str, list[float]]) -> list[dict]:
    """The rows with the judge's P("yes") as each statement's model half (``rel``); the per-part
    relevance is dropped (the judged selection fills no parts)."""
    out = []
    for r in rows:
        r = copy.deepcopy(r)
        r.pop("parts", None)
        if r["id"] in scores:
            for x, s in zip(r["cands"], scores[r["id"]], strict=True):
                x["rel"] = s
        elif not r["unanswerable"]:
            raise SystemExit(f"no judge scores for {r['id']}: run python bench/guideline_judge.py score")
        out.append(r)
    return out


def grid(args) -> None:
    from medr2.config import RecommendConfig

    scores = {x["id"]: x["judge"] for x in map(json.loads, SCORES.read_text().splitlines())}
    rows = dev_rows()
    shipped = G.replay(rows, RecommendConfig())
    jrows = judged(rows, scores)
    results = []
    for vals in itertools.product(*SPACE.values()):
        kw = dict(zip(SPACE, vals))
        results.append((kw, G.replay(jrows, RecommendConfig(**kw).for_judge())))
    results.sort(key=lambda x: G.objective(x[1]))
    default = RecommendConfig().for_judge()
    now = G.replay(jrows, default)

    def row(name: str, s: dict) -> str:
        return (f"| {name} | {s['omission']:.3f} | {(s['precision'] or 0):.3f} | {s['conflicts']:.3f} | "
                f"{s['false_abstention']:.3f} | {(s['abstention'] or 0):.3f} | {s['items']:.2f} | "
                f"{G.objective(s)[0]:.3f} |")
    lines = ["# The generator as the statement judge: dev choice (bench/guideline_judge.py grid)", "",
             f"Dev: {shipped['n']} NGC questions + {shipped['n_unanswerable']} unanswerable, passage mode, the rows of "
             "`bench/guideline.py collect --dev-only --tag=-s24`; the judge's P(yes) from "
             "`bench/results/guideline-judge/dev-scores.jsonl`. Objective (as `bench/guideline.py grid`): omission + "
             "(1 - precision) + conflicts, then fewer items. Abstention is the shipped rule (coarse reranker).", "",
             "| selection | omission | precision | conflicts | false abst. | abstention | items | objective |",
             "|---|---:|---:|---:|---:|---:|---:|---:|",
             row("extractive path, shipped (cross-encoder + overlap, fill)", shipped),
             row("judged, the shipped judge_* defaults", now)]
    for kw, s in results[:12]:
        lines.append(row("judged, " + ", ".join(f"{k[6:]} {v}" for k, v in kw.items()), s))
    lines += ["", f"Best on dev: `{json.dumps(results[0][0])}`", ""]
    text = "\n".join(lines) + "\n"
    (G.RESULTS / "guideline-judge" / "dev.md").write_text(text, encoding="utf-8")
    print(text)


def report(args) -> None:
    """The product run (``medr2 eval trust --llm local``, ``recommend.llm_answer = "quote"``,
    passage mode) on the report split: the answerable questions and the unanswerable ones."""
    from eval import medr2, trust_index

    from medr2.eval.trust import summarize

    qs, dev = G.all_questions()
    qs = [q for q in qs if q["id"] not in dev]
    G.OUT.mkdir(parents=True, exist_ok=True)
    qfile = G.OUT / "questions-report.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in qs), encoding="utf-8")
    conf = G.OUT / "judge.toml"
    conf.write_text((ROOT / "bench" / "eval.toml").read_text(encoding="utf-8")
                    + '\n[recommend]\nllm_answer = "quote"\n', encoding="utf-8")
    out = G.RESULTS / "eval" / "trust" / "recommend-judged"
    subprocess.check_call(medr2("eval", "trust", "--questions", str(qfile), "--index", str(trust_index()),
                                "--llm", "local", "--config", str(conf), "--out", str(out), "--mode", "passage"))
    rows = [json.loads(f.read_text()) for f in sorted((out / "passage").glob("*.json"))]
    s = summarize(rows)
    n_rec = [len(r.get("recommendations") or []) for r in rows if not r.get("unanswerable")]
    pct = lambda v: "-" if v is None else f"{100 * v:.0f}%"  # noqa: E731
    text = ("| mode | split | N | omission | grounded precision | unsupported | conflicts | invalid citations | "
            "false abstention | N unanswerable | abstention | recommendations per answer |\n"
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n"
            f"| passage, judged | report | {s['n']} | {pct(s['omission'])} | {pct(s['grounded_precision'])} | "
            f"{pct(s['unsupported'])} | {pct(s['conflict_rate'])} | {pct(s['invalid_citation'])} | "
            f"{pct(s['insufficient_rate'])} | {s['n_unanswerable']} | {pct(s['abstention_rate'])} | "
            f"{sum(n_rec) / max(len(n_rec), 1):.2f} |\n")
    (G.RESULTS / "guideline-judge" / "report.md").write_text(text, encoding="utf-8")
    print(text)


# The rule that decides recommend.llm_answer's default with a generator, written before either dev
# run (2026-12-08): "quote" becomes the default when, on the dev split's product runs, its
# omission + (1 - grounded precision) + conflicts + unsupported is lower than "write"'s and its
# abstention - false abstention is not lower; otherwise "write" stays.
def modes_rule(write: dict, quote: dict) -> tuple[bool, str]:
    def cost(s):
        return s["omission"] + (1 - (s["grounded_precision"] or 0)) + s["conflict_rate"] + s["unsupported"]

    def margin(s):
        return (s["abstention_rate"] or 0) - s["insufficient_rate"]
    adopt = cost(quote) < cost(write) and margin(quote) >= margin(write)
    return adopt, (f"cost write {cost(write):.3f}, quote {cost(quote):.3f}; abstention - false abstention "
                   f"write {margin(write):.3f}, quote {margin(quote):.3f}")


def modes(args) -> None:
    """The product runs (``medr2 eval trust --llm local``, passage mode) of both generator answers on
    the dev split's answerable questions and its first 11 unanswerable ones (the 25 added for the
    abstention thresholds left out, for time), paired; :func:`modes_rule` decides."""
    from eval import medr2, trust_index

    from medr2.eval.trust import summarize

    a, u = G.load(G.QUESTIONS), G.load(G.UNANSWERABLE)
    qs = [q for q in a if q["id"] in G.dev_ids(a)] + [q for q in u if q["id"] in G.dev_ids(u)]
    qfile = G.OUT / "questions-dev.jsonl"
    qfile.write_text("".join(json.dumps(q) + "\n" for q in qs), encoding="utf-8")
    got = {}
    for mode in ("quote", "write"):
        conf = G.OUT / f"mode-{mode}.toml"
        conf.write_text((ROOT / "bench" / "eval.toml").read_text(encoding="utf-8")
                        + f'\n[recommend]\nllm_answer = "{mode}"\n', encoding="utf-8")
        out = G.RESULTS / "eval" / "trust" / f"modes-dev-{mode}"
        subprocess.check_call(medr2("eval", "trust", "--questions", str(qfile), "--index", str(trust_index()),
                                    "--llm", "local", "--config", str(conf), "--out", str(out), "--mode", "passage"))
        got[mode] = {json.loads(f.read_text())["id"]: json.loads(f.read_text())
                     for f in sorted((out / "passage").glob("*.json"))}
    ids = sorted(set(got["write"]) & set(got["quote"]))
    sums = {m: summarize([got[m][i] for i in ids]) for m in got}
    pct = lambda v: "-" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    lines = ["| dev split, passage mode | N | omission | grounded precision | unsupported | conflicts | "
             "false abstention | N unanswerable | abstention | median s |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for m in ("write", "quote"):
        s = sums[m]
        secs = sorted(r.get("seconds") or 0 for r in (got[m][i] for i in ids))
        lines.append(f"| {m} | {s['n']} | {pct(s['omission'])} | {pct(s['grounded_precision'])} | "
                     f"{pct(s['unsupported'])} | {pct(s['conflict_rate'])} | {pct(s['insufficient_rate'])} | "
                     f"{s['n_unanswerable']} | {pct(s['abstention_rate'])} | {secs[len(secs) // 2]:.1f} |")
    om = {m: {i: got[m][i]["metrics"]["omission"] for i in ids if not got[m][i].get("unanswerable")} for m in got}
    better = sum(om["quote"][i] < om["write"][i] for i in om["quote"])
    worse = sum(om["quote"][i] > om["write"][i] for i in om["quote"])
    adopt, why = modes_rule(sums["write"], sums["quote"])
    lines += ["", f"omission, quote against write: {better} questions better, {worse} worse",
              f"rule (written before the runs): {why} -> {'quote' if adopt else 'write'} as the default"]
    text = "\n".join(lines) + "\n"
    (G.RESULTS / "guideline-judge" / "modes-dev.md").write_text(text, encoding="utf-8")
    print(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("phase", choices=["score", "grid", "report", "modes"])
    args = ap.parse_args()
    {"score": score, "grid": grid, "report": report, "modes": modes}[args.phase](args)


if __name__ == "__main__":
    main()
