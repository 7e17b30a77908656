"""Before/after table of this folder's loglik records (bench/README.md, CPU speed).

    python compare.py                 # before/ against after/
    python compare.py after avx512    # after/ (AVX2 build) against avx512/ (the AVX-512 build)
"""
import json, glob, statistics, sys, os
from pathlib import Path
HERE = str(Path(__file__).resolve().parent) + "/"
BEFORE, AFTER = (sys.argv[1:3] if len(sys.argv) >= 3 else ("before", "after"))
rows = []
for f in sorted(glob.glob(HERE + AFTER + "/*/medr2+loglik/*/*.json")):
    if f.endswith("manifest.json"): continue
    b = f.replace(HERE + AFTER + "/", HERE + BEFORE + "/")
    if not os.path.exists(b): continue
    A = json.load(open(f))[1]; B = json.load(open(b))[1]
    st = lambda x: {k: round(v["llm_seconds"], 1) for k, v in x["usage"]["stages"].items() if v["llm_seconds"] > 0.5}
    rows.append((A["dataset"], A["id"], A["gold"], B["prediction"], A["prediction"], B["seconds"], A["seconds"], st(B), st(A),
                 [c["passage_id"] for c in B["context"]] == [c["passage_id"] for c in A["context"]]))
out = ["| set | id | gold | before | after | before s | after s | same context |", "|---|---|---|---|---|---:|---:|---|"]
for r in rows:
    out.append(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]} | {r[5]:.1f} | {r[6]:.1f} | {'yes' if r[9] else 'no'} |")
same = sum(r[3] == r[4] for r in rows)
out.append(f"\n{len(rows)} questions: same prediction {same}; correct before {sum(r[3]==r[2] for r in rows)}, after {sum(r[4]==r[2] for r in rows)}; "
           f"median seconds before {statistics.median(r[5] for r in rows):.1f}, after {statistics.median(r[6] for r in rows):.1f}; "
           f"mean before {statistics.mean(r[5] for r in rows):.1f}, after {statistics.mean(r[6] for r in rows):.1f}")
agg = {}
for r in rows:
    for tag, d in (("before", r[7]), ("after", r[8])):
        for k, v in d.items(): agg.setdefault((tag, k), []).append(v)
out.append("\nMean LLM seconds per stage: " + "; ".join(f"{t} {k} {sum(v)/len(rows):.1f}" for (t, k), v in sorted(agg.items())))
print("\n".join(out))
