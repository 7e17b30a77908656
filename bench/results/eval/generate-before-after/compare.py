"""Before/after table of this folder's generated records (bench/README.md, CPU speed).

    python compare.py            # before/ (baseline build, grammar always, no stored openings,
                                 # rounds always regenerated) against after/ (the defaults)
"""
import glob, json, os, statistics
from pathlib import Path

HERE = str(Path(__file__).resolve().parent) + "/"
rows = []
for f in sorted(glob.glob(HERE + "after/*/medr2/*/*.json")):
    if f.endswith("manifest.json"):
        continue
    b = f.replace(HERE + "after/", HERE + "before/")
    if not os.path.exists(b):
        continue
    A, B = json.load(open(f))[1], json.load(open(b))[1]
    ctx = lambda r: [c["passage_id"] for c in r["context"]]
    rows.append(dict(set=A["dataset"], id=A["id"], gold=A["gold"], before=B["prediction"], after=A["prediction"],
                     bs=B["seconds"], as_=A["seconds"], same_ctx=ctx(A) == ctx(B),
                     same_cites=sorted(A["citations"]) == sorted(B["citations"]),
                     ins=(B["insufficient"], A["insufficient"]),
                     btok=(B["usage"]["prompt_tokens"], B["usage"]["completion_tokens"]),
                     atok=(A["usage"]["prompt_tokens"], A["usage"]["completion_tokens"]),
                     err=(B["error"], A["error"])))
out = ["| set | id | gold | before | after | before s | after s | same context | same citations | insufficient b/a |",
       "|---|---|---|---|---|---:|---:|---|---|---|"]
yn = lambda x: "yes" if x else "no"
for r in rows:
    out.append(f"| {r['set']} | {r['id']} | {r['gold']} | {r['before']} | {r['after']} | {r['bs']:.1f} | {r['as_']:.1f} "
               f"| {yn(r['same_ctx'])} | {yn(r['same_cites'])} | {yn(r['ins'][0])}/{yn(r['ins'][1])} |")
n = len(rows)
same = sum(r["before"] == r["after"] for r in rows)
out.append(f"\n{n} questions: same prediction {same}; correct before {sum(r['before'] == r['gold'] for r in rows)}, "
           f"after {sum(r['after'] == r['gold'] for r in rows)}; same context {sum(r['same_ctx'] for r in rows)}; "
           f"errors before {sum(bool(r['err'][0]) for r in rows)}, after {sum(bool(r['err'][1]) for r in rows)}")
out.append(f"seconds: median before {statistics.median(r['bs'] for r in rows):.1f}, after {statistics.median(r['as_'] for r in rows):.1f}; "
           f"mean before {statistics.mean(r['bs'] for r in rows):.1f}, after {statistics.mean(r['as_'] for r in rows):.1f}")
out.append(f"tokens per question (prompt / completion): before {statistics.mean(r['btok'][0] for r in rows):.0f} / "
           f"{statistics.mean(r['btok'][1] for r in rows):.0f}, after {statistics.mean(r['atok'][0] for r in rows):.0f} / "
           f"{statistics.mean(r['atok'][1] for r in rows):.0f}")
for s in sorted({r["set"] for r in rows}):
    g = [r for r in rows if r["set"] == s]
    out.append(f"- {s}: same {sum(r['before'] == r['after'] for r in g)}/{len(g)}, right before {sum(r['before'] == r['gold'] for r in g)}, "
               f"after {sum(r['after'] == r['gold'] for r in g)}, median s {statistics.median(r['bs'] for r in g):.1f} -> "
               f"{statistics.median(r['as_'] for r in g):.1f}")
print("\n".join(out))
