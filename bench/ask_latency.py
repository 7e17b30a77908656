"""Wall time of a cited ``medr2 ask`` from the shell (issue 39): one fresh process per question on
the demo index, the demo budget (``medr2.demo.demo_config``), the bundled generator, an empty
answer cache for every ask. Two settings run side by side, question by question:

* ``before`` - every JSON reply decoded under the grammar (``llm.grammar = "always"``), no disk
  KV states (``llm.prefix_store_mb = 0``), a round generated again whenever its context order
  changed (``assess.repeat_same_passages = false``);
* ``after`` - the defaults: unconstrained-first decoding, prompt openings loaded from disk,
  a round with the same passages repeats the previous answer.

The ``after`` KV store starts empty (a private ``$MEDR2_HOME`` whose models and runtime link to
the real ones), so the first question pays for writing it, as a newcomer's first ask does.
Answers of both settings are compared: the same text, or the change is listed.

Usage::

    python bench/ask_latency.py                      # 8 demo questions, ~25 minutes on 2 cores
    python bench/ask_latency.py --questions 3
    python bench/ask_latency.py --compare answer --out bench/results/ask-answer-mode   # write / quote
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

RESULTS = ROOT / "bench" / "results"

COMPARISONS = {
    "speed": {
        "before": {"llm": {"grammar": "always", "prefix_store_mb": 0}, "assess": {"repeat_same_passages": False}},
        "after": {"llm": {}, "assess": {}},
    },
    # a guideline question's answer with a generator: written from the applicable recommendations, or
    # the recommendations the model judges to apply, quoted (recommend.llm_answer; the default since
    # 2026-12-08)
    "answer": {
        "write": {"llm": {}, "recommend": {"llm_answer": "write"}},
        "quote": {"llm": {}, "recommend": {"llm_answer": "quote"}},
    },
}
SETTINGS = COMPARISONS["speed"]


def config_text(setting: dict, cache: Path) -> str:
    """The CPU budget the demo uses (``cpu-budget.toml``) as a config file, with the setting's
    overrides and a fresh answer cache."""
    import tomllib

    from medr2.demo import CPU_BUDGET

    sections = tomllib.loads(CPU_BUDGET.read_text(encoding="utf-8"))
    for name, kv in {**setting, "llm": {**setting["llm"], "cache_path": str(cache)}}.items():
        sections.setdefault(name, {}).update(kv)
    lines = []
    for name, kv in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in kv.items()]
    return "\n".join(lines) + "\n"


def private_home(work: Path) -> Path:
    """A ``$MEDR2_HOME`` with an empty KV store whose models and runtime are the real ones."""
    from medr2.util.paths import medr2_home

    real, home = medr2_home(), work / "home"
    home.mkdir()
    for name in ("models", "runtime", "kg"):
        if (real / name).exists():
            (home / name).symlink_to(real / name)
    return home


def ask(question: str, index: Path, cfg: Path, env: dict) -> dict:
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "medr2.cli", "ask", question, "--index", str(index), "--config",
                        str(cfg), "--llm", "local", "--json"], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise SystemExit(f"medr2 ask failed ({p.returncode}):\n{p.stderr[-2000:]}")
    out = json.loads(p.stdout[p.stdout.index("{"):])
    u = out.get("usage", {})
    return {"wall_seconds": round(wall, 2), "answer": out.get("answer"), "citations": out.get("citations"),
            "method": out.get("method"), "recommendations": len(out.get("recommendations") or []),
            "insufficient": out.get("insufficient"), "rounds": len(out.get("rounds", [])),
            "round_answers": [r.get("answer") for r in out.get("rounds", [])],
            "notes": [n for n in out.get("notes", []) if "repeated" in n],
            "calls": u.get("calls"), "prompt_tokens": u.get("prompt_tokens"),
            "reused_tokens": u.get("reused_tokens"), "completion_tokens": u.get("completion_tokens")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--out", type=Path, default=RESULTS / "ask-latency")
    ap.add_argument("--compare", choices=sorted(COMPARISONS), default="speed",
                    help="speed: the CPU-speed settings before / after; answer: recommend.llm_answer write / quote")
    args = ap.parse_args()
    settings = COMPARISONS[args.compare]
    first, second = list(settings)

    from medr2.demo import CORPUS, questions
    from medr2.index.index import Index
    from medr2.ingest.pipeline import ingest

    work = Path(tempfile.mkdtemp(prefix="medr2-ask-lat-"))
    index = work / "index"
    with Index.open(index, create=True, writable=True) as idx:
        ingest(idx, [CORPUS], progress=False)
    env = {**os.environ, "MEDR2_HOME": str(private_home(work))}
    qs = questions()[: args.questions]
    records: list[dict] = []
    for i, q in enumerate(qs, 1):
        rec = {"question": q["question"]}
        for name, setting in settings.items():
            cfg = work / f"{name}-{i}.toml"
            cfg.write_text(config_text(setting, work / f"llm-cache-{name}-{i}.sqlite"), encoding="utf-8")
            rec[name] = ask(q["question"], index, cfg, env)
            print(f"[{i}/{len(qs)}] {name}: {rec[name]['wall_seconds']} s, {rec[name]['calls']} calls, "
                  f"{rec[name]['prompt_tokens']} prompt ({rec[name]['reused_tokens']} reused) + "
                  f"{rec[name]['completion_tokens']} completion tokens, rounds {rec[name]['rounds']}", flush=True)
        records.append(rec)

    lines = [f"Date {date.today()}; machine: {platform.machine()}, {os.cpu_count()} cores, Python "
             f"{platform.python_version()}", "",
             f"### Cited `medr2 ask` from the shell, demo budget, bundled generator, {len(qs)} demo questions", "",
             f"| # | {first} s | {second} s | rounds {first} / {second} | same answer | question |", "|---|---:|---:|---|---|---|"]
    for i, r in enumerate(records, 1):
        b, a = r[first], r[second]
        same = "yes" if (b["answer"], b["citations"]) == (a["answer"], a["citations"]) else "**no**"
        lines.append(f"| {i} | {b['wall_seconds']} | {a['wall_seconds']} | {b['rounds']} / {a['rounds']} | {same} | "
                     f"{r['question']} |")
    for name in settings:
        w = sorted(r[name]["wall_seconds"] for r in records)
        lines.append(f"\n{name}: median {statistics.median(w):.1f} s, max {w[-1]:.1f} s, mean "
                     f"{statistics.mean(w):.1f} s" + (f" (after the first ask: median {statistics.median(sorted(r[name]['wall_seconds'] for r in records[1:])):.1f} s)"
                                                      if len(records) > 1 else ""))
    changed = [(i, r) for i, r in enumerate(records, 1)
               if (r[first]["answer"], r[first]["citations"]) != (r[second]["answer"], r[second]["citations"])]
    if changed:
        lines.append(f"\nChanged answers ({first} -> {second}):")
        for i, r in changed:
            lines.append(f"- {i} ({r[first]['method']} -> {r[second]['method']}): {r[first]['answer']!r} "
                         f"{r[first]['citations']} -> {r[second]['answer']!r} {r[second]['citations']}; {second} notes: "
                         f"{r[second]['notes']}")
    text = "\n".join(lines)
    print("\n" + text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".md").write_text(text + "\n", encoding="utf-8")
    args.out.with_suffix(".json").write_text(json.dumps(records, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
