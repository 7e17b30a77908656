"""llama.cpp's own prefill and decode rates for a GGUF model on this machine (the ceiling), the
thread / batch / KV-type settings that reach it, and medr2's chat call at the same prompt
length as a ratio to it (issue 39).

Sections:

* ``grid`` - raw ``Llama.eval`` prefill of one prompt (``--grid-tokens`` long) for each
  n_threads x n_batch (= n_ubatch) x K-cache type, and the decode rate (one token at a time).
* ``lengths`` - raw prefill and medr2's ``LlamaCppLLM.chat`` (max_tokens 1, the prompt cut to
  the same token count) at the prompt lengths medr2 sends, with medr2's settings (llm.n_threads,
  n_batch, n_ubatch from the config): medr2 rate / raw rate.
* ``reuse`` - a chat prompt whose opening (instructions + demonstrations, ``--prefix-tokens``)
  was evaluated by an earlier call of another shape: seconds with the prefix cache and without.

The prompt text is demo-corpus prose (bundled with medr2), so the token mix is medical English.

Usage::

    python bench/prefill.py                         # ~15 minutes on 2 cores
    python bench/prefill.py --only lengths --lengths 512 2048
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

OUT = ROOT / "bench" / "out"


def corpus_text() -> str:
    from medr2.demo import CORPUS

    return "\n\n".join(p.read_text() for p in sorted(Path(CORPUS).rglob("*.md")))


def tokens_of(llm, text: str, n: int) -> list[int]:
    ids = llm.tokenize(text.encode(), add_bos=True)
    while len(ids) < n:
        ids = ids + ids[1:]
    return ids[:n]


def raw(path: Path, threads: int, batch: int, type_k: int | None, n_ctx: int):
    import llama_cpp

    kw = {"type_k": type_k} if type_k is not None else {}
    return llama_cpp.Llama(model_path=str(path), n_ctx=n_ctx, n_threads=threads, n_threads_batch=threads,
                           n_batch=batch, n_ubatch=batch, seed=0, verbose=False, **kw)


def prefill_rate(llm, ids: list[int]) -> float:
    llm.reset()
    t = time.perf_counter()
    llm.eval(ids)
    return len(ids) / (time.perf_counter() - t)


def decode_rate(llm, ids: list[int], n: int = 24) -> float:
    llm.reset()
    llm.eval(ids)
    t = time.perf_counter()
    for _ in range(n):
        llm.eval([ids[-1]])
    return n / (time.perf_counter() - t)


def table(rows: list[list], header: list[str]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---:" if i else "---" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def bench_grid(args, path: Path, text: str, results: dict) -> None:
    import llama_cpp

    kv = {"f16": None, "q8_0": llama_cpp.GGML_TYPE_Q8_0}
    rows, res = [], []
    for threads in args.threads:
        for batch in args.batches:
            for kname in args.kv:
                llm = raw(path, threads, batch, kv[kname], args.grid_tokens + 64)
                ids = tokens_of(llm, text, args.grid_tokens)
                prefill_rate(llm, ids[:64])  # warm-up
                p = prefill_rate(llm, ids)
                d = decode_rate(llm, ids[:256]) if kname == "f16" else None
                del llm
                res.append({"threads": threads, "batch": batch, "kv": kname, "prefill_tps": round(p, 1),
                            "decode_tps": None if d is None else round(d, 1)})
                rows.append([threads, batch, kname, f"{p:.1f}", "" if d is None else f"{d:.1f}"])
                print(f"  threads {threads} batch {batch} kv {kname}: prefill {p:.1f} tok/s", file=sys.stderr)
    results["grid"] = {"tokens": args.grid_tokens, "runs": res}
    print(f"\n### llama.cpp prefill of {args.grid_tokens} tokens by setting\n")
    print(table(rows, ["n_threads", "n_batch = n_ubatch", "K cache", "prefill tok/s", "decode tok/s (256-token context)"]))


def bench_lengths(args, path: Path, text: str, results: dict) -> None:
    from medr2.config import Config
    from medr2.llm.llamacpp import LlamaCppLLM

    cfg = Config().llm
    threads = cfg.n_threads or (os.cpu_count() or 2)
    n_ctx = max(args.lengths) + 256
    base = raw(path, threads, cfg.n_batch, None, n_ctx)
    lm = LlamaCppLLM(args.model, n_ctx=n_ctx, n_threads=threads, n_batch=cfg.n_batch, n_ubatch=cfg.n_ubatch,
                     prefix_cache_mb=0)
    rows, res = [], []
    for n in args.lengths:
        ids = tokens_of(base, text, n)
        prefill_rate(base, ids[:64])
        r = prefill_rate(base, ids)
        # a chat prompt of n tokens: the same prose, cut by the template's overhead
        body = base.detokenize(ids[1: n - 30]).decode(errors="ignore")
        lm.generator.reset()
        t = time.perf_counter()
        out = lm.chat([{"role": "user", "content": body}], max_tokens=1)
        sec = time.perf_counter() - t
        m = out["prompt_tokens"] / sec
        res.append({"tokens": n, "raw_tps": round(r, 1), "medr2_prompt_tokens": out["prompt_tokens"],
                    "medr2_tps": round(m, 1), "ratio": round(m / r, 3)})
        rows.append([n, f"{r:.1f}", out["prompt_tokens"], f"{m:.1f}", f"{m / r:.2f}"])
        print(f"  {n} tokens: raw {r:.1f}, medr2 {m:.1f} tok/s", file=sys.stderr)
    results["lengths"] = {"threads": threads, "n_batch": cfg.n_batch, "n_ubatch": cfg.n_ubatch, "runs": res}
    print(f"\n### Prefill by prompt length: llama.cpp raw eval against medr2's chat call "
          f"(n_threads {threads}, n_batch {cfg.n_batch}, n_ubatch {cfg.n_ubatch})\n")
    print(table(rows, ["prompt tokens", "llama.cpp tok/s", "medr2 prompt tokens", "medr2 tok/s", "ratio"]))


def bench_reuse(args, path: Path, text: str, results: dict) -> None:
    from medr2.llm.base import Usage, track
    from medr2.llm.llamacpp import LlamaCppLLM

    from medr2.config import Config

    cfg = Config().llm
    threads = cfg.n_threads or (os.cpu_count() or 2)
    words = text.split()
    opening = " ".join(words[: int(args.prefix_tokens * 0.75)])
    rows, res = [], []
    for mb in (0, cfg.prefix_cache_mb or 1024):
        lm = LlamaCppLLM(args.model, n_ctx=4096, n_threads=threads, prefix_cache_mb=mb)
        other = [{"role": "system", "content": "You write search queries."},
                 {"role": "user", "content": "Queries for: metformin in CKD"}]
        times, usage = [], Usage()
        with track(usage):
            for i in range(3):
                q = " ".join(words[2000 + 150 * i: 2000 + 150 * (i + 1)])
                t = time.perf_counter()
                lm.chat([{"role": "system", "content": opening}, {"role": "user", "content": q}], max_tokens=1)
                times.append(time.perf_counter() - t)
                lm.chat(other, max_tokens=1)  # a prompt of another shape in between
        cache = getattr(lm.generator, "cache", None)
        held = cache.cache_size / 2**20 if cache is not None else 0.0
        res.append({"prefix_cache_mb": mb, "seconds": [round(x, 2) for x in times], "reused_tokens":
                    usage.reused_tokens, "prompt_tokens": usage.prompt_tokens, "states_mb": round(held, 1)})
        rows.append([mb, " / ".join(f"{x:.1f}" for x in times), usage.prompt_tokens, usage.reused_tokens,
                     f"{held:.0f}"])
        del lm
    results["reuse"] = res
    print(f"\n### Prefix reuse: three prompts opening with the same ~{args.prefix_tokens} tokens, a prompt of "
          "another shape between them\n")
    print(table(rows, ["llm.prefix_cache_mb", "seconds of the 3 calls", "prompt tokens (all 6 calls)",
                       "reused tokens", "MB of kept states"]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="bundled:qwen2.5-1.5b")
    ap.add_argument("--only", nargs="*", default=["grid", "lengths", "reuse"])
    ap.add_argument("--threads", nargs="*", type=int, default=[1, 2])
    ap.add_argument("--batches", nargs="*", type=int, default=[64, 256, 512])
    ap.add_argument("--kv", nargs="*", default=["f16", "q8_0"])
    ap.add_argument("--grid-tokens", type=int, default=768)
    ap.add_argument("--lengths", nargs="*", type=int, default=[256, 1024, 2048, 3900])
    ap.add_argument("--prefix-tokens", type=int, default=900)
    args = ap.parse_args()
    from medr2.llm.llamacpp import resolve_gguf

    path = resolve_gguf(args.model)
    text = corpus_text()
    print(f"Date {date.today().isoformat()}; machine: {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}; model {path.name}")
    results: dict = {"date": date.today().isoformat(), "model": path.name, "cores": os.cpu_count()}
    for name in args.only:
        {"grid": bench_grid, "lengths": bench_lengths, "reuse": bench_reuse}[name](args, path, text, results)
        sys.stdout.flush()
    OUT.mkdir(exist_ok=True)
    (OUT / f"prefill-{date.today().isoformat()}.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
