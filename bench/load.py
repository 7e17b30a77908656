"""Bounded load test of `medr2 serve` on loopback: concurrent clients on /search and /ask for a
fixed time; prints throughput, latency percentiles, errors and the server's memory.

The server runs as a subprocess (`medr2 serve`) over a copy of an index (default: the demo
index, built if missing), with the deterministic extractive answer path unless --llm is given
(the bundled generator takes minutes per answer on 2 cores). Usage::

    python bench/load.py                                   # 50 x /search + 4 x /ask for 60 s
    python bench/load.py --search-clients 20 --ask-clients 2 --seconds 30 --index .demo/index
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
QUERIES = ["metformin kidney function", "SGLT2 inhibitor heart failure", "community-acquired pneumonia antibiotics",
           "blood pressure target in diabetes", "lactic acidosis risk", "eGFR decline", "hypoglycaemia admission",
           "ACE inhibitor cough", "GLP-1 receptor agonist HbA1c", "CURB-65 severity"]
QUESTIONS = ["Can metformin be used when the eGFR is 35?", "Which drug slows kidney disease in type 2 diabetes?",
             "What antibiotic is first-line for mild community-acquired pneumonia?",
             "Does an SGLT2 inhibitor lower the risk of kidney failure?"]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else float("nan")


async def client_loop(base: str, kind: str, i: int, stop_at: float, out: dict) -> None:
    async with httpx.AsyncClient(base_url=base, timeout=httpx.Timeout(900.0)) as c:
        n = 0
        while time.time() < stop_at:
            t = time.perf_counter()
            try:
                if kind == "search":
                    r = await c.post("/search", json={"query": QUERIES[(i + n) % len(QUERIES)], "k": 10})
                else:
                    r = await c.post("/ask", json={"question": QUESTIONS[(i + n) % len(QUESTIONS)], "mode": "medr2"})
                ok = r.status_code == 200
                out[kind]["status"][r.status_code] = out[kind]["status"].get(r.status_code, 0) + 1
            except httpx.HTTPError as e:
                ok = False
                out[kind]["status"][type(e).__name__] = out[kind]["status"].get(type(e).__name__, 0) + 1
            out[kind]["lat" if ok else "err_lat"].append(time.perf_counter() - t)
            out[kind]["sent"] += 1
            n += 1


async def run(base: str, search_clients: int, ask_clients: int, seconds: float, pid: int) -> dict:
    out = {k: {"lat": [], "err_lat": [], "status": {}, "sent": 0} for k in ("search", "ask")}
    mem = [rss_mb(pid)]
    stop_at = time.time() + seconds

    async def sample():
        while time.time() < stop_at:
            await asyncio.sleep(2)
            mem.append(rss_mb(pid))

    t0 = time.time()
    await asyncio.gather(sample(), *[client_loop(base, "search", i, stop_at, out) for i in range(search_clients)],
                         *[client_loop(base, "ask", i, stop_at, out) for i in range(ask_clients)])
    out["wall"] = time.time() - t0
    mem.append(rss_mb(pid))
    out["mem"] = mem
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--index", type=Path, help="Index to serve (copied first); default: the demo index.")
    ap.add_argument("--search-clients", type=int, default=50)
    ap.add_argument("--ask-clients", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--llm", default="none")
    ap.add_argument("--workers", type=int, default=1, help="serve.llm_workers")
    a = ap.parse_args()
    medr2 = str(Path(sys.executable).parent / "medr2")
    work = Path(tempfile.mkdtemp(prefix="medr2-load-"))
    index = work / "index"
    if a.index:
        shutil.copytree(a.index, index)
    else:
        subprocess.run([medr2, "ingest", str(ROOT / "src" / "medr2" / "demo" / "corpus"), "--index", str(index),
                        "--no-progress"], check=True, stdout=subprocess.DEVNULL)
        subprocess.run([medr2, "kg", "build", "--index", str(index), "--no-progress"], check=True,
                       stdout=subprocess.DEVNULL)
    cfg = work / "serve.toml"
    cfg.write_text(f"[serve]\nllm_workers = {a.workers}\nqueue_timeout_s = 600\nask_timeout_s = 900\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([medr2, "serve", "--index", str(index), "--config", str(cfg), "--port", str(port),
                             "--llm", a.llm, "--scorer", "none"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(base + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        httpx.post(base + "/search", json={"query": "warm up", "k": 5}, timeout=60)
        httpx.post(base + "/ask", json={"question": "warm up metformin?"}, timeout=900)
        res = asyncio.run(run(base, a.search_clients, a.ask_clients, a.seconds, proc.pid))
    finally:
        proc.terminate()
        proc.wait(20)
        shutil.rmtree(work, ignore_errors=True)
    print(f"## Load test - {date.today()} - {platform.machine()}, {os.cpu_count()} cores; {a.search_clients} clients "
          f"on /search + {a.ask_clients} on /ask (generator: {a.llm}, {a.workers} answer worker) for {a.seconds:.0f} s\n")
    print("| endpoint | requests | ok | errors | throughput (req/s) | p50 ms | p95 ms | p99 ms | statuses |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for k in ("search", "ask"):
        r = res[k]
        lat = [x * 1000 for x in r["lat"]]
        print(f"| /{k} | {r['sent']} | {len(r['lat'])} | {len(r['err_lat'])} | {len(r['lat']) / res['wall']:.1f} | "
              f"{pct(lat, 50):.0f} | {pct(lat, 95):.0f} | {pct(lat, 99):.0f} | {json.dumps(r['status'])} |")
    m = res["mem"]
    print(f"\nserver RSS: {m[0]:.0f} MB at start, {max(m):.0f} MB peak, {m[-1]:.0f} MB at the end "
          f"(median of the second half {statistics.median(m[len(m) // 2:]):.0f} MB)")


if __name__ == "__main__":
    main()
