"""Reports of evaluation runs (``medr2 eval report RUN_DIR...``): Markdown tables laid out like
Med-R2's Table 2 (methods x datasets, best in bold) and Table 10 (ablations against vanilla RAG),
the trust-metric table, and PNG plots: grouped bars per method (like its Figure 4) and, when the
runs vary the context window or the model, a heatmap of improvement over direct answering (like
its Figure 5). Every table states N, std, the model, the corpus and the commit.

The table builders are pure functions of score rows ``{dataset, method, model, n, accuracy, std}``.

Example::

    >>> from medr2.eval.report import methods_table
    >>> rows = [{"dataset": "medqa", "method": "direct", "model": "m", "n": 100, "accuracy": 40.0, "std": 4.9},
    ...         {"dataset": "medqa", "method": "medr2", "model": "m", "n": 100, "accuracy": 52.0, "std": 5.0}]
    >>> print(methods_table(rows, "m"))
    | method | medqa | Avg |
    |---|---:|---:|
    | direct | 40.00 ± 4.90 | 40.00 |
    | medr2 | **52.00 ± 5.00** | **52.00** |
    <BLANKLINE>
    N per dataset: medqa 100
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Optional

from medr2.eval.plots import plot_bars, plot_heatmap

ABLATIONS = ["vanilla_rag", "+reformulator", "+reranker", "+cot", "+reformulator+reranker", "+reformulator+cot",
             "+reranker+cot", "medr2"]
METHOD_ORDER = ["direct", "direct_cot", "vanilla_rag", "llm_amt", *ABLATIONS[1:-1], "kg", "medr2", "tcm_diffrag"]


LOGLIK = "+loglik"  # the runner's suffix for --answer-mode loglik
MODES = ("", LOGLIK, "+loglik-cal")  # generated, log-likelihood, calibrated log-likelihood answers


def split_mode(name: str) -> tuple[str, str]:
    """A run's method name split into the method and its answer mode's suffix.

    >>> split_mode("medr2+loglik-cal"), split_mode("direct+loglik"), split_mode("vanilla_rag")
    (('medr2', '+loglik-cal'), ('direct', '+loglik'), ('vanilla_rag', ''))
    """
    for sfx in sorted(MODES, key=len, reverse=True):
        if sfx and name.endswith(sfx):
            return name[: -len(sfx)], sfx
    return name, ""


def _order(methods) -> list[str]:
    """Methods in the papers' order; a method's log-likelihood variants (``NAME+loglik``,
    ``NAME+loglik-cal``) follow it."""
    def key(m: str):
        base, sfx = split_mode(m.split("@")[0])  # METHOD@WINDOW: one method at several context windows
        return (METHOD_ORDER.index(base) if base in METHOD_ORDER else 99, base, MODES.index(sfx), m)

    return sorted(methods, key=key)


def common_datasets(rows: list[dict], model: str, methods) -> list[str]:
    """The datasets every one of ``methods`` was run on: averages compare methods over these only."""
    mine = [r for r in rows if r["model"] == model and r["method"] in set(methods)]
    sets = [{r["dataset"] for r in mine if r["method"] == m} for m in set(methods)]
    return sorted(set.intersection(*sets)) if sets else []


def averages(rows: list[dict], model: str, datasets: Optional[list[str]] = None) -> dict[str, float]:
    """Unweighted mean accuracy over the datasets of each method (as MIRAGE averages), restricted
    to ``datasets`` when given."""
    by: dict[str, list[float]] = {}
    for r in rows:
        if r["model"] == model and (datasets is None or r["dataset"] in datasets):
            by.setdefault(r["method"], []).append(r["accuracy"])
    return {m: sum(v) / len(v) for m, v in by.items()}


def methods_table(rows: list[dict], model: str) -> str:
    """Methods x datasets, best in bold. Avg is over the datasets every method was run on, so a
    method run on fewer datasets is never averaged against a different set. A method run on one
    dataset only (a side measurement, such as CoT on one set) has no Avg and does not shrink the
    others' set to its one dataset. A run that answered fewer questions than the dataset's
    largest run (a partial run) shows its N and is never bold: its accuracy is over other
    questions."""
    mine = [r for r in rows if r["model"] == model]
    datasets = sorted({r["dataset"] for r in mine})
    methods = _order({r["method"] for r in mine})
    cell = {(r["method"], r["dataset"]): r for r in mine}
    full = {d: max(cell[(m, d)]["n"] for m in methods if (m, d) in cell) for d in datasets}
    complete = {k for k, r in cell.items() if r["n"] == full[r["dataset"]]}
    best = {d: max((cell[(m, d)]["accuracy"] for m in methods if (m, d) in complete), default=None)
            for d in datasets}
    spread = [m for m in methods if sum((m, d) in cell for d in datasets) > 1]
    averaged = spread if spread and len(datasets) > 1 else methods
    common = common_datasets(rows, model, averaged)
    avg = {m: a for m, a in averages(rows, model, common).items() if m in averaged} if common else {}
    whole = {m for m in avg if all((m, d) in complete for d in common)}
    best_avg = max((avg[m] for m in whole), default=None)
    lines = ["| method | " + " | ".join(datasets) + " | Avg |", "|---|" + "---:|" * (len(datasets) + 1)]
    for m in methods:
        cells = []
        for d in datasets:
            r = cell.get((m, d))
            if r is None:
                cells.append("–")
                continue
            txt = f"{r['accuracy']:.2f} ± {r['std']:.2f}"
            if (m, d) not in complete:
                cells.append(f"{txt} (N = {r['n']}, partial)")
                continue
            cells.append(f"**{txt}**" if r["accuracy"] == best[d] else txt)
        if m in avg:
            a = f"{avg[m]:.2f}" + ("" if m in whole else " (partial)")
            cells.append(f"**{a}**" if m in whole and avg[m] == best_avg else a)
        else:
            cells.append("–")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    ns = {d: sorted({cell[(m, d)]["n"] for m in methods if (m, d) in cell}) for d in datasets}
    single = [m for m in methods if m not in averaged]
    note = "" if common == datasets else (
        "\n\nAvg over the datasets every " + ("other " if single else "") + "method ran on: "
        + (", ".join(common) if common else "none (no Avg)"))
    if single:
        note += "\n\nNo Avg for a method run on one dataset only: " + ", ".join(single)
    return "\n".join(lines) + "\n\nN per dataset: " + ", ".join(
        f"{d} {'/'.join(str(x) for x in n)}" for d, n in ns.items()) + note


def cost_table(rows: list[dict], model: str) -> Optional[str]:
    """Seconds per question per method and dataset, from the runs' records: the median, which a
    question that waited while its run was paused or shared the cores does not move (the mean
    when a row has no median)."""
    mine = [r for r in rows if r["model"] == model and r.get("seconds") is not None]
    if not mine:
        return None
    datasets = sorted({r["dataset"] for r in mine})
    cell = {(r["method"], r["dataset"]): r["median_seconds"] if r.get("median_seconds") is not None else r["seconds"]
            for r in mine}
    lines = ["| method | " + " | ".join(datasets) + " |", "|---|" + "---:|" * len(datasets)]
    for m in _order({r["method"] for r in mine}):
        lines.append(f"| {m} | " + " | ".join("–" if (m, d) not in cell else f"{cell[(m, d)]:.1f}" for d in datasets)
                     + " |")
    return "\n".join(lines)


def paired_table(marks: dict[tuple[str, str, str], dict[str, bool]], model: str) -> Optional[str]:
    """Each method against direct answering in the same answer mode (else the other mode), on the
    questions both answered (a partial run is compared on its own questions): both accuracies,
    the questions only one got right, and the exact McNemar p-value."""
    from medr2.eval.breakdown import paired_row

    lines = []
    for (d, m, mo), got in sorted(marks.items()):
        same_mode = "direct" + split_mode(m)[1]
        # direct answering in the same answer mode, else in the other one (direct_cot vs direct+loglik)
        base = next((b for b in (same_mode, "direct", "direct" + LOGLIK) if b != m and (d, b, mo) in marks), None)
        if mo != model or base is None or m in ("direct", "direct" + LOGLIK):
            continue
        ref = marks[(d, base, mo)]
        ids = sorted(set(got) & set(ref))
        if not ids:
            continue
        r = paired_row(d, ids, got, ref)
        acc, acc_ref = 100 * r.method_right / r.n, 100 * r.base_right / r.n
        lines.append(f"| {d} | {m} | {base} | {r.n} | {acc_ref:.1f} | {acc:.1f} | {acc - acc_ref:+.1f} "
                     f"| {r.only_method} / {r.only_base} | {r.p:.3f} |")
    if not lines:
        return None
    head = ["| dataset | method | against | paired N | against acc | method acc | Δ | only method / only against right "
            "| McNemar p |", "|---|---|---|---:|---:|---:|---:|---:|---:|"]
    return "\n".join(head + lines)


def ablation_table(rows: list[dict], model: str,
                   marks: Optional[dict[tuple[str, str, str], dict[str, bool]]] = None) -> Optional[str]:
    """Table 10 layout, one block per answer mode (generated, log-likelihood, calibrated): each ablation's
    average over the datasets they all ran on, with the questions (N) each answered there, and
    its difference from vanilla RAG. With per-question ``marks`` the difference is paired: on
    each dataset over the questions both answered, then averaged; so a partial run is compared
    on its own questions. Without marks it is the difference of averages, given only when both
    answered as many questions."""
    blocks = []
    for suffix in MODES:
        have = {r["method"] for r in rows if r["model"] == model}
        present = [m for m in ABLATIONS if m + suffix in have]
        if "vanilla_rag" not in present or len(present) < 2:
            continue
        common = common_datasets(rows, model, [m + suffix for m in present])
        if not common:
            continue
        avg = averages(rows, model, common)
        base = "vanilla_rag" + suffix
        n: dict[str, int] = {}
        for r in rows:
            if r["model"] == model and r["dataset"] in common:
                n[r["method"]] = n.get(r["method"], 0) + r["n"]
        lines = ["| reformulator | reranker | CoT | iterative | method | N | Avg | paired N | Δ vs vanilla RAG |",
                 "|:-:|:-:|:-:|:-:|---|---:|---:|---:|---:|"]
        scored = bool(suffix)  # a scored letter: no chain of thought, so medr2 runs one round
        for m in present:
            on = [m == "medr2" or f"+{x}" in m for x in ("reformulator", "reranker", "cot")] + [m == "medr2"]
            flags = ["–" if scored and i >= 2 else "✓" if x else "" for i, x in enumerate(on)]  # CoT, iterative
            meth = m + suffix
            delta, paired = _paired_delta(marks, model, meth, base, common) if marks is not None else (
                (avg[meth] - avg[base], n[meth]) if n[meth] == n[base] else (None, 0))
            d = "–" if delta is None else f"{delta:+.2f}"
            lines.append(f"| {' | '.join(flags)} | {meth} | {n[meth]} | "
                         f"{avg[meth]:.2f} | {paired or '–'} | {d} |")
        blocks.append("\n".join(lines) + f"\n\nAvg over: {', '.join(common)}" + (
            "; Δ is paired: on each dataset over the questions both answered, then averaged." if marks is not None
            else "; Δ only where both answered as many questions.") + (
            " CoT and iterative do not apply (–): the answer is a scored letter, with no chain of thought to "
            "widen a second round, so medr2 here is one round of reformulator and reranker." if scored else ""))
    return "\n\n".join(blocks) or None


def _paired_delta(marks: dict[tuple[str, str, str], dict[str, bool]], model: str, method: str, base: str,
                  datasets: list[str]) -> tuple[Optional[float], int]:
    """Mean over ``datasets`` of (accuracy of ``method`` - accuracy of ``base``) in points, each
    over the questions both answered; and how many questions that was in all."""
    deltas, total = [], 0
    for d in datasets:
        got, ref = marks.get((d, method, model), {}), marks.get((d, base, model), {})
        ids = set(got) & set(ref)
        if ids:
            deltas.append(100 * (sum(got[i] for i in ids) - sum(ref[i] for i in ids)) / len(ids))
            total += len(ids)
    return (sum(deltas) / len(deltas) if deltas else None), total


def trust_table(summaries: dict[str, dict]) -> str:
    cols = [("required_in_context", "required in context"), ("omission", "omission"),
            ("conflict_rate", "conflict rate"), ("unsupported", "unsupported claims"),
            ("invalid_citation", "invalid citations"), ("grounded_precision", "evidence-grounded precision"),
            ("insufficient_rate", "insufficient")]
    lines = ["| mode | N | " + " | ".join(c for _, c in cols) + " | s / question (uncached) |",
             "|---|---:|" + "---:|" * (len(cols) + 1)]
    for mode in [m for m in ("no_rag", "passage", "full", "oracle_kg") if m in summaries] + \
            [m for m in summaries if m not in ("no_rag", "passage", "full", "oracle_kg")]:
        s = summaries[mode]
        vals = ["–" if s.get(k) is None else f"{100 * s[k]:.1f}%" for k, _ in cols]
        vals.append("–" if s.get("seconds_uncached") is None else f"{s['seconds_uncached']:.1f}")
        lines.append(f"| {mode} | {s['n']} | " + " | ".join(vals) + " |")
    return "\n".join(lines)


def ragas_table(summaries: dict[str, dict]) -> Optional[str]:
    """The RAGAS-style metrics of a trust run, one row per mode; judge metrics with the mean
    per-question std of repeated judge runs in brackets, and the judged conflict rate (which
    reads contradictions worded differently from the recommendation)."""
    have = {m: s["ragas"] for m, s in summaries.items() if s.get("ragas")}
    if not have:
        return None
    cols = [("context_entity_recall", "entity recall"), ("answer_similarity", "answer similarity"),
            ("faithfulness", "faithfulness"), ("context_precision", "context precision"),
            ("context_recall", "context recall"), ("conflict", "conflict rate (judge)")]

    def cell(r: dict, k: str) -> str:
        if r.get(k) is None:
            return "–"
        std = r.get(k + "_judge_std")
        return f"{r[k]:.3f}" + (f" (±{std:.3f})" if std else "")

    lines = ["| mode | " + " | ".join(c for _, c in cols) + " | judge failures |", "|---|" + "---:|" * (len(cols) + 1)]
    for mode, r in have.items():
        lines.append(f"| {mode} | " + " | ".join(cell(r, k) for k, _ in cols) + f" | {r.get('judge_failures', 0)} |")
    return "\n".join(lines)


def improvement_grid(rows: list[dict], method: str = "medr2",
                     marks: Optional[dict[tuple[str, str, str], dict[str, bool]]] = None
                     ) -> dict[tuple[str, Optional[int]], float]:
    """(model, context window) -> mean over datasets of ``method``'s accuracy minus direct
    answering's on the same dataset, model and answer mode (a log-likelihood run is compared with
    ``direct+loglik`` and its model is labelled "MODEL loglik"); with per-question ``marks``
    over the questions both answered. Rows carry the context window of their run as
    ``context_tokens``; a method run at several windows has one row per window (``collect``
    names them ``METHOD@WINDOW``)."""
    diffs: dict[tuple[str, Optional[int]], list[float]] = {}
    for r in rows:
        base, sfx = split_mode(r["method"].split("@")[0])
        if base != method:
            continue
        direct = "direct" + sfx
        ref = next((x for x in rows if x["method"] == direct and x["dataset"] == r["dataset"]
                    and x["model"] == r["model"]), None)
        if ref is None:
            continue
        diff: Optional[float] = r["accuracy"] - ref["accuracy"]
        if marks is not None:
            diff, _ = _paired_delta(marks, r["model"], r["method"], direct, [r["dataset"]])
        if diff is not None:
            diffs.setdefault((r["model"] + sfx.replace("+", " "), r.get("context_tokens")), []).append(diff)
    return {k: sum(v) / len(v) for k, v in diffs.items()}


def answer_counts(records: dict[str, dict]) -> dict[str, dict[str, int]]:
    """How often each answer was given and how often it is the gold one, over one run's records
    (an unparsed or abstained answer is ``""``)."""
    out: dict[str, dict[str, int]] = {"predicted": {}, "gold": {}}
    for r in records.values():
        for side, x in (("predicted", r.get("prediction") or ""), ("gold", r.get("gold") or "")):
            out[side][x] = out[side].get(x, 0) + 1
    return out


def answer_table(answers: dict[tuple[str, str, str], dict[str, dict[str, int]]], model: str) -> Optional[str]:
    """Per dataset: how often each answer is right (gold) and how often each method gave it, with
    the shift between the two (:func:`medr2.eval.scoring.answer_shift`). A partial run's gold row
    is that of its own questions, so each dataset shows the gold counts of its largest run."""
    from medr2.eval.scoring import answer_shift

    mine = {(d, m): v for (d, m, mo), v in answers.items() if mo == model and sum(v["predicted"].values())}
    if not mine:
        return None
    labels = sorted({x for v in mine.values() for side in v.values() for x in side if x})
    labels += [""] if any("" in side for v in mine.values() for side in v.values()) else []
    head = ["| dataset | answers of | N | " + " | ".join(x or "none" for x in labels) + " | shift from gold |",
            "|---|---|---:|" + "---:|" * (len(labels) + 1)]
    lines = []
    for d in sorted({d for d, _ in mine}):
        runs = {m: v for (dd, m), v in mine.items() if dd == d}
        gold = max(runs.values(), key=lambda v: sum(v["gold"].values()))["gold"]
        lines.append(f"| {d} | gold | {sum(gold.values())} | " + " | ".join(str(gold.get(x, 0)) for x in labels) + " | – |")
        for m in _order(runs):
            pred = runs[m]["predicted"]
            lines.append(f"| {d} | {m} | {sum(pred.values())} | " + " | ".join(str(pred.get(x, 0)) for x in labels)
                         + f" | {answer_shift(pred, runs[m]['gold']):.2f} |")
    return "\n".join(head + lines)


def collect(run_dirs: list[Path]) -> tuple[list[dict], dict[str, Any]]:
    """Score rows of every run directory and what their manifests say (models, corpus per
    dataset, commit). Each row carries its run's context window (``context_tokens``); when one
    (dataset, method, model) was run at several windows (in different run directories), its rows
    and question marks are named ``METHOD@WINDOW`` so that none overwrites another."""
    from medr2.eval.identity import moved_keys_read
    from medr2.eval.runner import question_marks, read_records, score_run

    rows: list[dict] = []
    # per run: (dataset, method, model), its context window, right/wrong per question, answer counts
    runs: list[tuple[tuple[str, str, str], Optional[int], dict[str, bool], dict[str, dict[str, int]]]] = []
    meta: dict[str, Any] = {"commits": set(), "corpus": {}, "seeds": set(), "marks": {}, "answers": {}}
    seen: dict[tuple[str, str, str, Optional[int]], Path] = {}  # which directory answered each run
    for root in dict.fromkeys(Path(d).resolve() for d in run_dirs):  # a directory named twice is read once
        records = read_records(root)
        ctx: dict[tuple[str, str, str], Optional[int]] = {}
        for mf in Path(root).rglob("manifest*.json"):
            m = json.loads(mf.read_text(encoding="utf-8"))
            parts = mf.relative_to(root).parts
            if len(parts) == 4:
                ctx[parts[:3]] = (moved_keys_read(m.get("config") or {}).get("apply") or {}).get("context_tokens")
                if m.get("corpus"):
                    meta["corpus"][parts[0]] = m["corpus"]
            if m.get("commit"):
                meta["commits"].add(m["commit"][:12])
            meta["seeds"].add(m.get("subset_seed"))
        for k in records:  # direct answering reads no evidence: its window is no axis
            where = seen.setdefault(k + (None if k[1].startswith("direct") else ctx.get(k),), root)
            if where != root:
                raise ValueError(f"{k[1]} on {k[0]} ({k[2]}) was answered in both {where} and {root} with the same "
                                 "context window: give one of the two run directories (their records would "
                                 "overwrite each other)")
        for r in score_run(root, records):
            rows.append(dict(r, context_tokens=ctx.get((r["dataset"], r["method"], r["model"]))))
        right = question_marks(records)
        runs += [(k, ctx.get(k), right[k], answer_counts(v)) for k, v in records.items()]
    windows: dict[tuple[str, str, str], set] = {}
    for r in rows:  # direct answering reads no evidence: its window is no axis
        if r["context_tokens"] is not None and not r["method"].startswith("direct"):
            windows.setdefault((r["dataset"], r["method"], r["model"]), set()).add(r["context_tokens"])
    several = {(m, mo) for (d, m, mo), w in windows.items() if len(w) > 1}
    for r in rows:
        if (r["method"], r["model"]) in several:
            r["method"] = f"{r['method']}@{r['context_tokens']}"
    for (d, m, mo), c, right, counts in runs:
        key = (d, f"{m}@{c}" if (m, mo) in several else m, mo)
        meta["marks"][key], meta["answers"][key] = right, counts
    return rows, meta


def write_report(run_dirs: list[Path], out: Path, trust_dirs: list[Path] = ()) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    rows, meta = collect(run_dirs)
    parts = ["# medr2 evaluation report", ""]
    parts.append(f"Runs: {', '.join(str(r) for r in run_dirs)}; commit(s): {', '.join(sorted(meta['commits'])) or '?'}; "
                 f"subset seed(s): {', '.join(str(s) for s in sorted(meta['seeds'], key=str))}; corpus: "
                 f"{_corpora(meta['corpus'])}. Accuracy in percent ± std = sqrt(p(1-p)/N).")
    for model in sorted({r["model"] for r in rows}):
        parts += ["", f"## {model}", "", methods_table(rows, model)]
        abl = ablation_table(rows, model, meta["marks"])
        if abl:
            parts += ["", "### Ablations (Table 10 layout)", "", abl]
        paired = paired_table(meta["marks"], model)
        if paired:
            parts += ["", "### Paired against direct answering (same questions)", "", paired]
        spread = answer_table(meta["answers"], model)
        if spread:
            parts += ["", "### Answers given against gold answers", "",
                      "Shift from gold: total variation distance between the shares of each answer given and "
                      "each answer right, over the run's own questions (0: no bias toward any answer).", "", spread]
        cost = cost_table(rows, model)
        if cost:
            parts += ["", "### Seconds per question (median)", "", cost]
        png = out / f"bars-{_slug(model)}.png"
        plot_bars(rows, model, png, _order({r["method"] for r in rows if r["model"] == model}))
        parts += ["", f"![accuracy by method]({png.name})"]
    grid = improvement_grid(rows, marks=meta["marks"])
    if len({c for _, c in grid}) > 1 or len({m for m, _ in grid}) > 1:
        plot_heatmap(grid, out / "heatmap.png")
        parts += ["", "## Improvement over direct answering by context window and model", "", "![heatmap](heatmap.png)"]
    for td in trust_dirs:
        s = json.loads((Path(td) / "summary.json").read_text(encoding="utf-8"))
        parts += ["", f"## Trust metrics ({td})", ""]
        mf = Path(td) / "manifest.json"
        if mf.is_file():
            m = json.loads(mf.read_text(encoding="utf-8"))
            gen = (m.get("models") or {}).get("generator") or "none (extractive answers)"
            parts += [f"Generator: {gen}; index: {m.get('index', '?')}; commit: {m.get('commit') or '?'}.", ""]
        parts += [trust_table(s)]
        rag = ragas_table(s)
        if rag:
            parts += ["", "RAGAS-style metrics (judge std over repeated runs in brackets):", "", rag]
    if not rows and not trust_dirs:
        raise ValueError("no scored runs found: give eval run output directories (RUN_DIR/<dataset>/<method>/<model>/)")
    f = out / "report.md"
    f.write_text("\n".join(parts) + "\n", encoding="utf-8")
    return f


def _corpora(by_dataset: dict[str, Any]) -> str:
    """The corpus the retrieval runs used, or one per group of datasets when they differ (MCMLE
    retrieves from a Chinese index)."""
    if not by_dataset:
        return "?"
    groups: dict[str, list[str]] = {}
    for d, c in sorted(by_dataset.items()):
        groups.setdefault(json.dumps(c, sort_keys=True), []).append(d)
    if len(groups) == 1:
        return next(iter(groups))
    return "; ".join(f"{', '.join(ds)}: {c}" for c, ds in groups.items())


def _slug(s: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in s)[:80]
