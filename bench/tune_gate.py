"""Choose the evidence gate's constants (``gate.min_relevance``, ``gate.evidence_weight``) on dev
records only, and replay any gate over recorded option scores.

A run made with the gate recording everything (``[gate] min_relevance = 0``, ``evidence_weight =
1``: plain RAG answers, and every record keeps the option letters' log-probabilities without and
with the evidence and the context's best relevance) holds what every other gate setting would
have answered: the gate is a pure function of those three (medr2.apply.gate). This script replays
a grid of settings over such records and prints accuracy per dataset, the macro mean, and the
choice: the highest macro accuracy, ties going to the larger weight and then the smaller
relevance floor (the setting nearer plain RAG).

    python bench/tune_gate.py bench/out/gate-dev/*/vanilla_rag+loglik/*      # dev runs: choose
    python bench/tune_gate.py RUN_DIRS --weight 0.5 --min-relevance 0.1      # replay one setting
    python bench/tune_gate.py RUN_DIRS --weight 0.4 --confidence-gain        # ... with the confidence rule
    python bench/tune_gate.py --grid bench/results/eval/runs --weight 0.5     # report: committed grid
    python bench/tune_gate.py bench/results/gate-dev/*/*/* --generated bench/results/gate-dev-generated
    python bench/tune_gate.py bench/results/gate-dev-zh/*/*/* --weight-only   # gate.language_weights["zh"]
    python bench/tune_gate.py --replay-gated bench/results/eval/runs-gated-v1 --weight 0.4 --confidence-gain  # report
    python bench/tune_gate.py --pool 'en=bench/results/gate-dev/*/*/*' --pool 'zh=bench/results/gate-dev-zh/*/*/*' \
        --pool 'tcm=bench/results/eval/tcm-dev/vanilla_rag/*/*/*'           # gate.confidence_gain with the weight

``--generated DIR`` chooses ``gate.generated_weight``: DIR holds generated runs of ``direct`` and
``vanilla_rag`` (plain RAG) on the same questions, ``DIR/<set>/<method>/<model>/<id>.json``; the
letters the model wrote without and with the evidence are weighed with the recorded option scores
as medr2.apply.gate.decide_generated does (where they agree, that letter).

``--grid`` replays a chosen weight over the committed evaluation records (reporting only): the
option scores without evidence are the direct run's, with evidence each retrieving method's,
question for question. Those records hold no relevance, so only the weight is replayed there.

Never point it at the seeded evaluation subsets to choose: those are for reporting.
"""

from __future__ import annotations

import argparse
import glob
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from medr2.apply.gate import best_letter, combine, decide, decide_generated  # noqa: E402
from medr2.eval.scoring import mcnemar_p  # noqa: E402

WEIGHTS = [round(0.1 * i, 1) for i in range(11)]
FLOORS = [0.0, 0.01, 0.02, 0.05, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5]


def load(run_dirs: list[Path]) -> list[dict]:
    """Records with a full gate entry (both score sets): {dataset, gold, s0, s1, rel}."""
    out, skipped = [], 0
    for d in run_dirs:
        for f in sorted(Path(d).glob("*.json")):
            if f.name.startswith("manifest"):
                continue
            rec = json.loads(f.read_text())[1]
            g = rec.get("gate") or {}
            if not g.get("scores_without") or not g.get("scores_with"):
                skipped += 1
                continue
            out.append({"dataset": rec["dataset"], "id": rec["id"], "gold": rec["gold"], "s0": g["scores_without"],
                        "s1": g["scores_with"], "rel": g.get("relevance")})
    if skipped:
        print(f"({skipped} record(s) without both score sets skipped: not made with min_relevance = 0)",
              file=sys.stderr)
    return out


def gated(r: dict, floor: float, weight: float, gain: bool = False) -> str:
    """The letter the pipeline's gate answers (medr2.apply.gate.decide) for this record."""
    return decide(r["s0"], r["s1"], r["rel"], floor, weight, gain).answer


def macro_accuracy(records: list[dict], letter) -> dict[str, float]:
    """Accuracy per dataset of ``letter(record)`` and their mean (``macro``)."""
    by = defaultdict(list)
    for r in records:
        by[r["dataset"]].append(letter(r) == r["gold"])
    acc = {k: sum(v) / len(v) for k, v in sorted(by.items())}
    acc["macro"] = sum(acc.values()) / len(acc)
    return acc


def accuracy(records: list[dict], floor: float, weight: float, gain: bool = False) -> dict[str, float]:
    return macro_accuracy(records, lambda r: gated(r, floor, weight, gain))


def choose_pooled(pools: dict[str, list[dict]]) -> None:
    """``gate.confidence_gain`` and ``gate.evidence_weight`` over several dev pools at once (a
    language or corpus each): the setting with the highest mean of the pools' macro accuracies,
    ties to the larger weight, then to no confidence rule. Prints the table and the choice."""
    names = list(pools)
    print("| confidence_gain | weight | " + " | ".join(names) + " | mean | worst pool vs direct |")
    print("|---|---:|" + "---:|" * (len(names) + 2))
    direct = {n: accuracy(pools[n], 0.0, 0.0)["macro"] for n in names}
    best = None
    for gain in (False, True):
        for w in WEIGHTS:
            if gain and w == 0.0:
                continue
            acc = {n: accuracy(pools[n], 0.0, w, gain)["macro"] for n in names}
            mean = sum(acc.values()) / len(acc)
            worst = min(acc[n] - direct[n] for n in names)
            print(f"| {gain} | {w} | " + " | ".join(f"{100 * acc[n]:.1f}" for n in names) +
                  f" | {100 * mean:.2f} | {100 * worst:+.1f} |")
            key = (round(mean, 9), w, not gain)
            if best is None or key > best[0]:
                best = (key, gain, w)
    _, gain, w = best
    print(f"\nchosen: gate.confidence_gain = {str(gain).lower()}, gate.evidence_weight = {w}")


def choose(records: list[dict], floors: list[float] = FLOORS) -> tuple[float, float, dict]:
    best = None
    for w in WEIGHTS:
        for m in floors:
            a = accuracy(records, m, w)["macro"]
            key = (round(a, 9), w, -m)
            if best is None or key > best[0]:
                best = (key, m, w)
    _, m, w = best
    return m, w, accuracy(records, m, w)


def written(run_dir: Path) -> dict[tuple[str, str], str]:
    """(dataset, id) -> the letter a generated run wrote, for every method folder named ``direct``
    or ``vanilla_rag`` under ``run_dir`` (keys prefixed by the method)."""
    out = {}
    for f in sorted(run_dir.glob("*/*/*/*.json")):
        if f.name.startswith("manifest"):
            continue
        method = f.parts[-3]
        if method in ("direct", "vanilla_rag"):
            rec = json.loads(f.read_text())[1]
            out[(method, rec["dataset"], rec["id"])] = rec["prediction"]
    return out


def attach_written(records: list[dict], run_dir: Path) -> list[dict]:
    """The loglik records that both generated runs answered, with ``a0`` (direct) and ``a1``
    (vanilla RAG) attached."""
    w = written(run_dir)
    out = []
    for r in records:
        a0, a1 = w.get(("direct", r["dataset"], r["id"])), w.get(("vanilla_rag", r["dataset"], r["id"]))
        if a0 in r["s0"] and a1 in r["s0"]:
            out.append(r | {"a0": a0, "a1": a1})
    return out


def generated_letter(r: dict, weight: float) -> str:
    """What the pipeline answers (medr2.pipelines.base.Method.gated_generate): weight 1 the
    letter written with the evidence, 0 the one written without, else the two weighed."""
    if r["a0"] == r["a1"] or weight in (0.0, 1.0):
        return r["a1"] if weight == 1.0 else r["a0"]
    return decide_generated(r["a0"], r["a1"], r["s0"], r["s1"], r["rel"], weight).answer


def accuracy_generated(records: list[dict], weight: float) -> dict[str, float]:
    return macro_accuracy(records, lambda r: generated_letter(r, weight))


def choose_generated(records: list[dict]) -> None:
    """Print the replay of every generated weight and the choice (highest macro accuracy, ties to
    the larger weight: nearer plain RAG)."""
    sets = sorted({r["dataset"] for r in records})
    differ = sum(r["a0"] != r["a1"] for r in records)
    print(f"{len(records)} questions with both written letters ({differ} differ)\n")
    print("| setting | " + " | ".join(sets) + " | macro |\n|---|" + "---:|" * (len(sets) + 1))
    best = None
    for w in WEIGHTS:
        a = accuracy_generated(records, w)
        name = {0.0: "written without evidence (direct)", 1.0: "written with evidence (vanilla RAG)"}.get(w, f"weight {w}")
        print(f"| {name} | " + " | ".join(f"{100 * a[s]:.1f}" for s in sets) + f" | {100 * a['macro']:.1f} |")
        if best is None or (round(a["macro"], 9), w) > best[0]:
            best = ((round(a["macro"], 9), w), w)
    w = best[1]
    ok = {i: generated_letter(r, w) == r["gold"] for i, r in enumerate(records)}
    for name, base in (("direct", 0.0), ("vanilla RAG", 1.0)):
        b = sum(ok[i] and generated_letter(r, base) != r["gold"] for i, r in enumerate(records))
        c = sum(not ok[i] and generated_letter(r, base) == r["gold"] for i, r in enumerate(records))
        print(f"\nweight {w} vs {name} (pooled): {b} / {c}, McNemar p {mcnemar_p(b, c):.3f}")
    print(f"\nchosen: gate.generated_weight = {w}")


def recorded_scores(f: Path) -> tuple[dict, dict[str, float]]:
    """A committed loglik record and its option scores (parsed from the MIRAGE-format rationale)."""
    mirage, rec = json.loads(f.read_text())
    why = json.loads(mirage)["step_by_step_thinking"]
    head = why.split(";")[0].removeprefix("log-likelihood of each option letter: ")
    scores = {}
    for part in head.split(", "):
        k, _, v = part.partition(" ")
        scores[k] = float(v)
    return rec, scores


def replay_grid(runs: Path, weight: float) -> None:
    """Accuracy of direct, each retrieving method, and the method behind the gate (weight only),
    with paired McNemar p against direct and against vanilla RAG."""
    print(f"Gate replay over {runs} (weight {weight}; relevance not recorded there)\n")
    print("| dataset | method | n | direct | method | gated | gated vs direct (b/c, p) | gated vs vanilla (b/c, p) |")
    print("|---|---|---:|---:|---:|---:|---|---|")
    for ds in sorted(p.name for p in runs.iterdir() if p.is_dir()):
        def records(method):
            d = runs / ds / f"{method}+loglik"
            out = {}
            for f in d.glob("*/*.json"):
                if not f.name.startswith("manifest"):
                    rec, sc = recorded_scores(f)
                    out[rec["id"]] = (rec, sc)
            return out
        direct, vanilla = records("direct"), records("vanilla_rag")
        for method in ("vanilla_rag", "+reformulator", "+reranker", "medr2"):
            recs = records(method)
            ids = sorted(set(recs) & set(direct) & set(vanilla))
            if not ids:
                continue
            gold = {i: recs[i][0]["gold"] for i in ids}
            ok_d = {i: direct[i][0]["correct"] for i in ids}
            ok_m = {i: recs[i][0]["correct"] for i in ids}
            ok_v = {i: vanilla[i][0]["correct"] for i in ids}
            ok_g = {i: best_letter(combine(direct[i][1], recs[i][1], weight)) == gold[i] for i in ids}

            def pair(a, b):
                x = sum(a[i] and not b[i] for i in ids)
                y = sum(b[i] and not a[i] for i in ids)
                return f"{x}/{y}, {mcnemar_p(x, y):.3f}"
            pct = lambda ok: f"{100 * sum(ok.values()) / len(ids):.0f}"  # noqa: E731
            print(f"| {ds} | {method} | {len(ids)} | {pct(ok_d)} | {pct(ok_m)} | {pct(ok_g)} | {pair(ok_g, ok_d)} | "
                  f"{pair(ok_g, ok_v)} |")


def replay_gated(runs: Path, weight: float, gain: bool) -> None:
    """Reporting only: what another gate setting would have answered in a grid run behind the gate
    (every record keeps both option distributions): each retrieving method's records replayed,
    direct as recorded, paired McNemar against direct and against vanilla RAG replayed the same way.
    Exact for single-pass methods; for medr2, whose later rounds follow its earlier answers, it
    replays the last round's distributions (an estimate)."""
    def records(ds: str, method: str) -> dict[str, dict]:
        out = {}
        for f in (runs / ds / f"{method}+loglik").glob("*/*.json"):
            if not f.name.startswith("manifest"):
                rec = json.loads(f.read_text())[1]
                g = rec.get("gate") or {}
                if method == "direct":
                    out[rec["id"]] = rec | {"ok": bool(rec["correct"])}
                elif g.get("scores_without") and g.get("scores_with"):
                    r = {"s0": g["scores_without"], "s1": g["scores_with"], "rel": g.get("relevance")}
                    out[rec["id"]] = rec | {"ok": gated(r, 0.0, weight, gain) == rec["gold"], "was": bool(rec["correct"])}
                else:  # the evidence was never scored (none passed appraisal): the same answer whatever the gate
                    out[rec["id"]] = rec | {"ok": bool(rec["correct"]), "was": bool(rec["correct"])}
        return out

    print(f"Replay of {runs} behind gate.evidence_weight {weight}, confidence_gain {str(gain).lower()} "
          "(right answers; as recorded -> replayed)\n")
    print("| dataset | method | n | direct | recorded | replayed | replayed vs direct (b/c, p) | vs vanilla RAG replayed |")
    print("|---|---|---:|---:|---:|---:|---|---|")
    pooled: dict[str, list] = defaultdict(list)
    for ds in sorted(p.name for p in runs.iterdir() if p.is_dir()):
        direct, vanilla = records(ds, "direct"), records(ds, "vanilla_rag")
        for method in ("vanilla_rag", "+reformulator", "+reranker", "medr2", "tcm_diffrag"):
            recs = records(ds, method)
            ids = sorted(set(recs) & set(direct) & set(vanilla))
            if not ids:
                continue
            rows = [(recs[i]["ok"], direct[i]["ok"], vanilla[i]["ok"], recs[i]["was"]) for i in ids]
            pooled[method] += rows
            print(f"| {ds} | {method} | " + _replay_cells(rows) + " |")
    for method, rows in pooled.items():
        print(f"| all | {method} | " + _replay_cells(rows) + " |")


def _replay_cells(rows: list[tuple[bool, bool, bool, bool]]) -> str:
    def pair(k: int) -> str:
        x, y = sum(r[0] and not r[k] for r in rows), sum(r[k] and not r[0] for r in rows)
        return f"{x}/{y}, {mcnemar_p(x, y):.3f}"
    return (f"{len(rows)} | {sum(r[1] for r in rows)} | {sum(r[3] for r in rows)} | {sum(r[0] for r in rows)} | "
            f"{pair(1)} | {pair(2)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", type=Path, help="run directories (records made with min_relevance = 0)")
    ap.add_argument("--grid", type=Path, help="replay --weight over committed evaluation runs (report only)")
    ap.add_argument("--weight", type=float, help="replay this evidence weight instead of choosing")
    ap.add_argument("--min-relevance", type=float, default=0.0)
    ap.add_argument("--generated", type=Path, help="choose gate.generated_weight with the generated runs in this folder")
    ap.add_argument("--weight-only", action="store_true",
                    help="choose the weight alone, at --min-relevance (a language's gate.language_weights entry: "
                         "the floor is one for every language)")
    ap.add_argument("--pool", action="append", default=[], metavar="NAME=GLOB",
                    help="a named dev pool of run directories (repeat): choose gate.confidence_gain and "
                         "gate.evidence_weight by the mean of the pools' macro accuracies")
    ap.add_argument("--replay-gated", type=Path, metavar="RUNS",
                    help="reporting only: replay --weight (and --confidence-gain) over a grid run behind the gate")
    ap.add_argument("--confidence-gain", action="store_true",
                    help="with --replay-gated, or with --weight over dev runs: the confidence rule on")
    args = ap.parse_args()
    if args.replay_gated:
        if args.weight is None:
            ap.error("--replay-gated needs --weight (chosen on dev records first)")
        replay_gated(args.replay_gated, args.weight, args.confidence_gain)
        return 0
    if args.pool:
        pools = {}
        for spec in args.pool:
            name, _, pattern = spec.partition("=")
            dirs = sorted(Path(x) for x in glob.glob(pattern))
            if not name or not dirs:
                ap.error(f"--pool {spec!r}: give NAME=GLOB with a glob that matches run directories")
            pools[name] = load(dirs)
            if not pools[name]:
                ap.error(f"--pool {spec!r}: no record there holds both option distributions")
            sets = sorted({r["dataset"] for r in pools[name]})
            print(f"{name}: {len(pools[name])} records from {len(dirs)} runs ({', '.join(sets)})")
        print()
        choose_pooled(pools)
        return 0
    if args.grid:
        if args.weight is None:
            ap.error("--grid needs --weight (chosen on dev records first)")
        replay_grid(args.grid, args.weight)
        return 0
    recs = load(args.runs)
    if not recs:
        raise SystemExit("no usable records")
    if args.generated:
        both = attach_written(recs, args.generated)
        if not both:
            raise SystemExit(f"no question of these records was answered by both generated runs in {args.generated}")
        choose_generated(both)
        return 0
    sets = sorted({r["dataset"] for r in recs})
    counts = {s: sum(r["dataset"] == s for r in recs) for s in sets}
    print(f"{len(recs)} records: " + ", ".join(f"{s} {n}" for s, n in counts.items()) + "\n")
    head = "| setting | " + " | ".join(sets) + " | macro |\n|---|" + "---:|" * (len(sets) + 1)
    print(head)

    def row(name, a):
        print(f"| {name} | " + " | ".join(f"{100 * a[s]:.1f}" for s in sets) + f" | {100 * a['macro']:.1f} |")

    row("no evidence (direct)", accuracy(recs, 0.0, 0.0))
    row("evidence alone (vanilla RAG)", accuracy(recs, 0.0, 1.0))
    if args.weight is not None:
        rule = ", confidence rule" if args.confidence_gain else ""
        row(f"gate: floor {args.min_relevance}, weight {args.weight}{rule}",
            accuracy(recs, args.min_relevance, args.weight, args.confidence_gain))
        return 0
    for w in WEIGHTS[1:-1]:
        row(f"weight {w}, no floor", accuracy(recs, 0.0, w))
    for w in WEIGHTS[1:]:  # for the record: the choice below is over weights and floors without the rule
        row(f"weight {w}, confidence rule", accuracy(recs, 0.0, w, True))
    for m in FLOORS[1:]:
        row(f"floor {m}, weight 1.0", accuracy(recs, m, 1.0))
    m, w, a = choose(recs, [args.min_relevance] if args.weight_only else FLOORS)
    row(f"**chosen: floor {m}, weight {w}**", a)
    rels = sorted(r["rel"] for r in recs if r["rel"] is not None)
    if rels:
        q = lambda p: rels[min(len(rels) - 1, int(p * len(rels)))]  # noqa: E731
        print(f"\nbest relevance in the context: p10 {q(0.1):.3f}, p50 {q(0.5):.3f}, p90 {q(0.9):.3f}")
    print(f"\nchosen: gate.min_relevance = {m}, gate.evidence_weight = {w}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
