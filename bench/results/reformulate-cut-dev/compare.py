"""retry (old: a cut-off reformulation asked again with 400 tokens) against fallback (new: the
offline reformulator answers instead), xmedbench_dev MedQA-USMLE, medr2 loglik: per question
prediction, seconds, reformulation tokens, and the exact McNemar test."""
import glob, json, os, statistics
from math import comb
from pathlib import Path

HERE = Path(__file__).resolve().parent
rows = []
for f in sorted(glob.glob(str(HERE / "fallback/*/*/*/*.json"))):
    if f.endswith("manifest.json"):
        continue
    o = f.replace("/fallback/", "/retry/")
    if not os.path.exists(o):
        continue
    N, O = json.load(open(f))[1], json.load(open(o))[1]
    ref = lambda r: r["usage"]["stages"]["reformulate"]
    rows.append((N["id"], N["gold"], O["prediction"], N["prediction"], O["seconds"], N["seconds"],
                 ref(O)["completion_tokens"], ref(N)["completion_tokens"], ref(O)["llm_seconds"], ref(N)["llm_seconds"]))
print("| id | gold | retry | fallback | retry s | fallback s | reformulation tokens retry / fallback |")
print("|---|---|---|---|---:|---:|---|")
for r in rows:
    print(f"| {r[0]} | {r[1]} | {r[2]} | {r[3]} | {r[4]:.1f} | {r[5]:.1f} | {r[6]} / {r[7]} |")
cut = [r for r in rows if r[7] >= 200]
b = sum(r[2] == r[1] and r[3] != r[1] for r in rows)
c = sum(r[3] == r[1] and r[2] != r[1] for r in rows)
p = min(1.0, 2 * sum(comb(b + c, k) for k in range(min(b, c) + 1)) / 2 ** (b + c)) if b + c else 1.0
print(f"\n{len(rows)} questions, {len(cut)} with the reformulation cut off at 200 tokens; correct retry "
      f"{sum(r[2] == r[1] for r in rows)}, fallback {sum(r[3] == r[1] for r in rows)}; only retry right {b}, only fallback right {c}, "
      f"exact McNemar p = {p:.2f}; same prediction {sum(r[2] == r[3] for r in rows)}")
print(f"seconds: median retry {statistics.median(r[4] for r in rows):.1f}, fallback {statistics.median(r[5] for r in rows):.1f}; "
      f"mean retry {statistics.mean(r[4] for r in rows):.1f}, fallback {statistics.mean(r[5] for r in rows):.1f}; "
      f"reformulation LLM s mean retry {statistics.mean(r[8] for r in rows):.1f}, fallback {statistics.mean(r[9] for r in rows):.1f}")
if cut:
    print(f"the {len(cut)} cut questions: median s retry {statistics.median(r[4] for r in cut):.1f}, "
          f"fallback {statistics.median(r[5] for r in cut):.1f}; same prediction {sum(r[2] == r[3] for r in cut)}")
