"""TCM-DiffRAG on TCMBench's development split (issue 37): direct answering, vanilla RAG and the
``tcm_diffrag`` pipeline, loglik answers, on a seeded 30% evaluation fold; the solved cases come
from the other 70%.

    python bench/tcm.py split        # bench/out/tcm/{train,eval}/{CVR,FKU,KHC}.json (groups kept whole)
    python bench/tcm.py index        # GB/T 16751 + the train fold's solved items, and the case graph
    python bench/tcm.py match        # how often the matched cases' paths hold the gold syndrome (no LLM)
    python bench/tcm.py run --kinds CVR --methods direct,vanilla_rag,tcm_diffrag
    python bench/tcm.py report       # accuracy by item kind, paired McNemar

The fold of a group (a case vignette with its sub-questions, or one question) is decided by the
SHA-1 of ``tcm-fold:<group>``: the same on every machine. Runs go to
``bench/results/eval/runs/tcmbench-*`` (committed, resumable); the index stays in ``bench/out/tcm``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("MEDR2_SHARED_DATA") or ROOT.parent / "shared" / "data")
DEV = SHARED / "benchmarks" / "tcmbench_dev"
GBT = SHARED / "corpora" / "chinese" / "tcm_terminology_gbt16751" / "GBT16751-2021_TCM_clinical_terms_parts1-3.txt"
OUT = ROOT / "bench" / "out" / "tcm"
RUNS = ROOT / "bench" / "results" / "eval" / "runs"
CONFIG = ROOT / "bench" / "tcm.toml"
KINDS = ("CVR", "FKU", "KHC")
TRAIN_SHARE = 0.7
# questions answered per kind (seeded subsets of the evaluation fold; CVR: all of it)
DEFAULT_N = {"CVR": 0, "FKU": 100, "KHC": 100}

sys.path.insert(0, str(ROOT / "src"))


def medr2(*args: str) -> list[str]:
    return [str(ROOT / ".venv" / "bin" / "medr2"), *args]


def fold(group: str) -> str:
    h = int(hashlib.sha1(f"tcm-fold:{group}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return "train" if h < TRAIN_SHARE else "eval"


def split() -> None:
    for kind in KINDS:
        data = json.loads((DEV / f"{kind}.json").read_text(encoding="utf-8"))
        parts = {"train": [], "eval": []}
        for n, rec in enumerate(data["example"], 1):
            parts[fold(f"{kind}-{rec.get('index', n)}")].append(rec)
        for name, recs in parts.items():
            out = OUT / name / f"{kind}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps({**data, "example": recs}, ensure_ascii=False), encoding="utf-8")
            print(f"{name}/{kind}.json: {len(recs)} groups")


def index() -> None:
    idx = OUT / "index"
    if (idx / "tcm-built").exists():
        return
    from medr2.terminology.sources import gbt16751_records

    words = {w for t in gbt16751_records(str(GBT)) for w in [t.zh, *t.alternatives]}
    for name in ("symptom", "disease", "drug"):
        words |= {x.strip() for x in (SHARED / "corpora" / "chinese" / "medical_kg_dicts" / f"{name}.txt").read_text(
            encoding="utf-8").splitlines() if len(x.strip()) >= 2}
    (OUT / "terms.txt").write_text("".join(f"{w}\n" for w in sorted(words) if " " not in w), encoding="utf-8")
    t = time.time()
    subprocess.check_call(medr2("ingest", str(GBT), "--index", str(idx), "--config", str(CONFIG)))
    for kind in KINDS:
        subprocess.check_call(medr2("ingest", str(OUT / "train" / f"{kind}.json"), "--index", str(idx)))
    for kind in KINDS:
        subprocess.check_call(medr2("kg", "cases", str(OUT / "train" / f"{kind}.json"), "--index", str(idx)))
    (idx / "tcm-built").write_text(f"built in {time.time() - t:.0f} s\n")


def match() -> None:
    """Share of evaluation syndrome questions whose matched cases' paths hold the gold syndrome."""
    from medr2.ingest.loaders.tcmbench import grouped, read_tcmbench
    from medr2.kg.build import open_kg
    from medr2.kg.tcm import CaseMatcher, aspect, cases_from_kg, containment, strip_suffix
    from medr2.config import Config

    c = Config().kg.cases
    kg = open_kg(OUT / "index")
    matcher = CaseMatcher(cases_from_kg(kg), c.finding_weight, c.min_similarity)
    kg.close()
    hits = total = 0
    for kind in ("CVR", "FKU"):
        for g in grouped(read_tcmbench(OUT / "eval" / f"{kind}.json")):
            for it in g:
                if aspect(it.stem, it.answer_text) != "syndrome":
                    continue
                got = matcher.match(it.text, c.k)
                names = [strip_suffix(m["nodes"].get("syndrome", "")) for m in got]
                gold = strip_suffix(it.answer_text)
                total += 1
                hits += any(n and containment(gold, n) >= 0.8 for n in names)
    print(f"gold syndrome in a matched path: {hits}/{total} = {hits / max(total, 1):.1%}")


def run(args) -> None:
    for kind in args.kinds.split(","):
        n = args.n if args.n is not None else DEFAULT_N[kind]
        spec = str(OUT / "eval" / f"{kind}.json") + (f":{n}" if n else "")
        for method in args.methods.split(","):
            cmd = medr2("eval", "run", "--dataset", spec, "--method", method, "--index", str(OUT / "index"),
                        "--config", str(CONFIG), "--answer-mode", "loglik", "--seed", "0",
                        "--out", str(RUNS), "--progress")
            t = time.time()
            print(f"== {method} on {kind} ({spec})", flush=True)
            rc = subprocess.call(cmd)
            print(f"== {method} on {kind}: exit {rc}, {time.time() - t:.0f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("phase", choices=["split", "index", "match", "run"])
    ap.add_argument("--kinds", default="CVR,FKU,KHC")
    ap.add_argument("--methods", default="direct,vanilla_rag,tcm_diffrag")
    ap.add_argument("--n", type=int)
    args = ap.parse_args()
    {"split": lambda: split(), "index": lambda: index(), "match": lambda: match(), "run": lambda: run(args)}[
        args.phase]()


if __name__ == "__main__":
    main()
