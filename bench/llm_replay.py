"""The pipeline's LLM calls replayed two ways, like for like (issue 39).

1. Answers the demo questions on the demo index (``make demo`` builds it) with the demo budget,
   the bundled generator and an empty answer cache, recording every JSON-schema call the
   pipeline decodes under a grammar (reformulation, draft, and replies decoded again after an
   unconstrained first try) and every continuation it scores (usefulness), with the per-stage
   seconds of each question.
2. Replays each recorded grammar call twice on a reset context: with llama-cpp-python's
   ``response_format`` (its grammar sampler over the whole vocabulary: the "before") and with
   :class:`medr2.llm.grammar_first.GrammarFirst` (the default now), and compares the replies.
3. Replays the scored continuations in their order on a fresh scorer without and with the
   scorer's RAM states (``llm.prefix_cache_mb = 0`` against the default), and compares the
   log-probabilities.

Usage::

    python bench/llm_replay.py                 # 8 demo questions, ~15 minutes on 2 cores
    python bench/llm_replay.py --questions 3

Writes ``bench/results/llm-replay.md`` and ``.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

RESULTS = ROOT / "bench" / "results"


def run_pipeline(index: str, n: int) -> tuple[list[dict], list[dict]]:
    from medr2.demo import demo_config, questions
    from medr2.llm import llamacpp
    from medr2.pipelines import Engine, Pipeline

    calls: list[dict] = []
    orig = llamacpp.LlamaCppLLM._complete

    def recording(self, llm, messages, max_tokens, temperature, seed, schema):
        if schema is not None and llm is self.generator:
            calls.append({"messages": messages, "max_tokens": max_tokens, "schema": schema})
        return orig(self, llm, messages, max_tokens, temperature, seed, schema)

    scored: list[dict] = []
    orig_score = llamacpp.LlamaCppLLM.continuation_logprobs

    def recording_score(self, prompt, continuation):
        scored.append({"model": str(self.path), "prompt": prompt, "continuation": continuation})
        return orig_score(self, prompt, continuation)

    llamacpp.LlamaCppLLM._complete = recording
    llamacpp.LlamaCppLLM.continuation_logprobs = recording_score
    cfg = demo_config()
    cfg.llm.cache_path = tempfile.mkdtemp() + "/answers.sqlite"
    engine = Engine.open(index, cfg, generator="local")
    rows = []
    for i, q in enumerate(questions()[:n], 1):
        t = time.perf_counter()
        r = Pipeline(engine, "medr2").run(q["question"], {})
        secs = time.perf_counter() - t
        stages = {k: round(v.get("seconds", 0), 1) for k, v in r.usage.get("stages", {}).items()
                  if v.get("seconds", 0) >= 0.3}
        rows.append({"n": i, "seconds": round(secs, 1), "rounds": len(r.rounds), "stages": stages,
                     "answer": r.answer})
        print(json.dumps(rows[-1])[:300], flush=True)
    llamacpp.LlamaCppLLM._complete = orig
    llamacpp.LlamaCppLLM.continuation_logprobs = orig_score
    return rows, calls, scored


def replay_scores(scored: list[dict]) -> dict:
    from medr2.llm.llamacpp import LlamaCppLLM

    out = {}
    for model in sorted({c["model"] for c in scored}):
        calls = [c for c in scored if c["model"] == model]
        res = {}
        for mb in (0, 1024):
            lm = LlamaCppLLM(model, n_ctx=4096, prefix_cache_mb=mb, prefix_store_mb=0)
            lm.scorer  # loaded before timing
            t = time.perf_counter()
            res[mb] = ([lm.continuation_logprobs(c["prompt"], c["continuation"]) for c in calls],
                       time.perf_counter() - t, lm._states.hits if lm._states else 0)
        out[model] = {"calls": len(calls), "without_s": round(res[0][1], 2), "with_s": round(res[1024][1], 2),
                      "states_found": res[1024][2], "same": res[0][0] == res[1024][0]}
        print(json.dumps({model: out[model]}), flush=True)
    return out


def replay(calls: list[dict]) -> list[dict]:
    import llama_cpp

    from medr2.llm.grammar_first import GrammarFirst
    from medr2.llm.llamacpp import LlamaCppLLM, grammar_schema

    lm = LlamaCppLLM("bundled:qwen2.5-1.5b", n_ctx=4096, prefix_cache_mb=0, prefix_store_mb=0)
    llm = lm.generator
    out = []
    for i, c in enumerate(calls, 1):
        g_schema = grammar_schema(c["schema"])
        llm.reset()
        t = time.perf_counter()
        full = llm.create_chat_completion(messages=c["messages"], max_tokens=c["max_tokens"], temperature=0, seed=0,
                                          response_format={"type": "json_object", "schema": g_schema})
        t_full = time.perf_counter() - t
        g = GrammarFirst(llm, g_schema)
        llm.reset()
        t = time.perf_counter()
        fast = llm.create_chat_completion(messages=c["messages"], max_tokens=c["max_tokens"], temperature=0, seed=0,
                                          logits_processor=llama_cpp.LogitsProcessorList([g]))
        t_fast = time.perf_counter() - t
        g.close()
        row = {"call": i, "prompt_tokens": full["usage"]["prompt_tokens"],
               "completion_tokens": full["usage"]["completion_tokens"], "full_s": round(t_full, 2),
               "first_s": round(t_fast, 2), "refused_steps": g.refused,
               "same": full["choices"][0]["message"]["content"] == fast["choices"][0]["message"]["content"]}
        out.append(row)
        print(json.dumps(row), flush=True)
    return out


def report(rows: list[dict], replays: list[dict], scores: dict) -> str:
    tok = sum(r["completion_tokens"] for r in replays)
    full = sum(r["full_s"] for r in replays)
    fast = sum(r["first_s"] for r in replays)
    lines = [f"# The pipeline's LLM calls replayed ({date.today()}, {platform.machine()}, bundled generator)", "",
             "## The demo questions (grammar-first decoding, demo budget, empty answer cache)", "",
             "| question | seconds | rounds | stages (s) |", "|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['n']} | {r['seconds']} | {r['rounds']} | "
                     + ", ".join(f"{k} {v}" for k, v in r["stages"].items()) + " |")
    lines += ["", f"Total {sum(r['seconds'] for r in rows):.1f} s, median "
              f"{statistics.median(r['seconds'] for r in rows):.1f} s a question.", "",
              "## The pipeline's grammar-decoded calls, replayed", "",
              f"{len(replays)} calls, {tok} reply tokens; identical replies: "
              f"{sum(r['same'] for r in replays)} of {len(replays)}.", "",
              "| decoding | seconds (prefill included) | ms per reply token over the difference |",
              "|---|---:|---:|",
              f"| llama.cpp grammar over the whole vocabulary | {full:.1f} | |",
              f"| grammar-first | {fast:.1f} | {1000 * (full - fast) / max(tok, 1):.1f} saved |", "",
              f"Steps whose best token the grammar refused: {sum(r['refused_steps'] for r in replays)} of "
              f"about {tok}.", "", "## The scored continuations (usefulness), replayed", "",
              "| scorer | calls | without states s | with states s | states found | same log-probabilities |",
              "|---|---:|---:|---:|---:|---|"]
    for m, r in scores.items():
        lines.append(f"| {Path(m).name} | {r['calls']} | {r['without_s']} | {r['with_s']} | {r['states_found']} | "
                     f"{'yes' if r['same'] else 'NO'} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", default=str(ROOT / ".demo" / "index"))
    ap.add_argument("--questions", type=int, default=8)
    a = ap.parse_args()
    if not Path(a.index).exists():
        sys.exit(f"no index at {a.index}: run `make demo` once to build it, or pass --index")
    rows, calls, scored = run_pipeline(a.index, a.questions)
    recorded = Path(tempfile.gettempdir()) / "medr2-llm-replay-recorded.json"
    recorded.write_text(json.dumps({"questions": rows, "calls": calls, "scored": scored}))
    print(f"recorded calls kept in {recorded}", flush=True)
    replays = replay(calls)
    scores = replay_scores(scored)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "llm-replay.json").write_text(json.dumps({"questions": rows, "replays": replays, "scores": scores}, indent=1))
    md = report(rows, replays, scores)
    (RESULTS / "llm-replay.md").write_text(md)
    print(md)


if __name__ == "__main__":
    main()
