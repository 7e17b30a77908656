"""Cold start of ``medr2 search`` and dense-encoder throughput, ONNX Runtime against torch.

1. Runs ``medr2 search QUERY --index INDEX`` ``--runs`` times as fresh processes with the models'
   engines chosen automatically (the ONNX exports when ``medr2 build-runtime`` has built them)
   and with both forced to torch (a config file with ``dense.runtime`` and ``rerank.runtime`` =
   "torch"); prints p50 / p95 / min wall seconds of each (one untimed run of each first, so the
   page cache is warm for both).
2. Embeds the first ``--passages`` passages of ``--corpus`` (any folder or file ``medr2 ingest``
   reads, segmented as ingestion does) with torch fp32 (the default batch and batch 8, the
   fastest fp32 setting measured), ONNX fp32, ONNX int8 (the ``bundled:all-MiniLM-L6-v2-int8``
   encoder) and bf16 passages on torch (``dense.passage_precision = "bf16"``), and prints
   passages/s and each one's cosine to torch fp32.

Run it on an otherwise idle machine, after ``medr2 build-runtime``::

    .venv/bin/python bench/cold_start.py --index .demo/index --corpus src/medr2/demo/corpus
    .venv/bin/python bench/cold_start.py --index IDX --corpus DIR --runs 1 --passages 50   # a quick check
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from medr2.util.retrieval_metrics import percentile  # noqa: E402

INT8 = "bundled:all-MiniLM-L6-v2-int8"
TORCH_TOML = '[dense]\nruntime = "torch"\n\n[rerank]\nruntime = "torch"\n'


def medr2_command() -> list[str]:
    """The ``medr2`` script beside this interpreter (as a user runs it), else ``python -m medr2.cli``."""
    script = Path(sys.executable).parent / "medr2"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "medr2.cli"]


def engines(extra: list[str], index: str) -> str:
    """What ``medr2 doctor`` says the dense model and the reranker run on."""
    p = subprocess.run([*medr2_command(), "doctor", "--json", "--index", index, *extra], capture_output=True, text=True)
    try:
        rep = json.loads(p.stdout)
    except ValueError:
        return f"doctor failed: {p.stderr.strip()[-300:]}"
    return ", ".join(f"{k} {rep[k].get('engine') or rep[k].get('error')}" for k in ("dense", "reranker"))


def cold_runs(query: str, index: str, extra: list[str], runs: int) -> list[float]:
    """Wall seconds of ``runs`` fresh ``medr2 search`` processes (after one untimed run)."""
    cmd = [*medr2_command(), "search", query, "--index", index, *extra]
    out = []
    for n in range(runs + 1):
        t = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True)
        wall = time.perf_counter() - t
        if p.returncode != 0:
            raise SystemExit(f"`{' '.join(cmd)}` failed ({p.returncode}): {p.stderr.strip()[-1000:]}")
        if n:
            out.append(wall)
    return out


def corpus_passages(corpus: Path, limit: int) -> list[str]:
    """The first ``limit`` passage texts of a corpus, as the dense encoder reads them at ingestion."""
    from medr2.config import Config
    from medr2.ingest.pipeline import choose_loader, expand_paths
    from medr2.ingest.segment import segment_document
    from medr2.schema import Document

    cfg = Config()
    files = expand_paths([corpus])[0]
    texts: list[str] = []
    for f in files:
        try:
            items = list(choose_loader(f, None).load(f, cfg))
        except Exception as e:  # an unreadable file: the benchmark reads the rest
            print(f"skipped {f}: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        for doc in items:
            if not isinstance(doc, Document):
                continue
            texts += [p.embedding_text(doc.title) for p in segment_document(doc, cfg.segment).passages]
            if len(texts) >= limit:
                return texts[:limit]
    return texts


def throughput(texts: list[str]) -> None:
    import numpy as np

    from medr2.config import DenseConfig
    from medr2.index.dense import load_encoder

    print(f"\n| encoder | engine | passages/s | passages |\n|---|---|---:|---:|")
    vecs = {}
    fp32 = {"passage_precision": "fp32"}
    for label, engine, cfg in (
            ("fp32", "torch", DenseConfig(runtime="torch", **fp32)),
            ("fp32, batch 8 (the fastest fp32 setting)", "torch", DenseConfig(runtime="torch", batch_size=8, **fp32)),
            ("fp32", "onnx", DenseConfig(runtime="onnx", **fp32)),
            ("int8", "onnx", DenseConfig(model=INT8)),
            ("bf16 passages (dense.passage_precision)", "torch", DenseConfig(passage_precision="bf16", bf16_min_passages=1))):
        enc = load_encoder(cfg)
        enc.encode_passages(texts[:8])  # warm-up
        t = time.perf_counter()
        vecs[(label, engine)] = enc.encode_passages(texts)
        secs = time.perf_counter() - t
        print(f"| all-MiniLM-L6-v2 {label} | {engine} | {len(texts) / secs:.1f} | {len(texts)} |", flush=True)
    ref = vecs[("fp32", "torch")]
    for key, v in vecs.items():
        if key != ("fp32", "torch"):
            cos = (ref * v).sum(1)
            print(f"cosine to torch fp32, {key[0]} on {key[1]}: min {float(cos.min()):.6f}, mean {float(cos.mean()):.6f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True, help="An index to search (e.g. .demo/index).")
    ap.add_argument("--corpus", required=True, type=Path, help="A folder or file of documents to embed.")
    ap.add_argument("--query", default="when should metformin be stopped in chronic kidney disease")
    ap.add_argument("--runs", type=int, default=10, help="Cold processes per engine (0: the throughput only).")
    ap.add_argument("--passages", type=int, default=500, help="Passages to embed for the throughput.")
    args = ap.parse_args()
    if not Path(args.index).is_dir():
        ap.error(f"--index {args.index} is not a directory")
    if not args.corpus.exists():
        ap.error(f"--corpus {args.corpus} does not exist")

    tmp = Path(tempfile.mkdtemp(prefix="medr2-cold-"))
    try:
        (tmp / "torch.toml").write_text(TORCH_TOML)
        modes = [("auto", []), ("torch", ["--config", str(tmp / "torch.toml")])]
        if args.runs > 0:
            print(f"`medr2 search` cold, {args.runs} run(s) each, index {args.index}\n")
            print("| runtime | engines | p50 s | p95 s | min s |\n|---|---|---:|---:|---:|")
        for name, extra in modes if args.runs > 0 else []:
            walls = cold_runs(args.query, args.index, extra, args.runs)
            print(f"| {name} | {engines(extra, args.index)} | {percentile(walls, 50):.2f} | "
                  f"{percentile(walls, 95):.2f} | {min(walls):.2f} |", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    texts = corpus_passages(args.corpus, args.passages)
    if not texts:
        raise SystemExit(f"no passages in {args.corpus}")
    throughput(texts)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
