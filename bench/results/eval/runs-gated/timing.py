"""Seconds per question of the gated grid's runs, by set and method, over the questions answered
afresh: left out are full answer-cache hits (an earlier run answered the question) and questions
whose reformulation or usefulness calls were hits. Hits in `generate` and `draft` stay: the gate's
option scores without evidence are the direct run's calls (the same prompt), and the draft's
scores are reused inside the question; in a fresh `medr2 ask` the former cost about a direct
answer (0.5-2 s, the direct rows)."""
import glob, json, statistics, sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[3] / "bench"))
from before_after import cached as cache_hit  # noqa: E402  (the same rule as bench/before_after.py)

by = defaultdict(list)
cached = defaultdict(int)
for f in glob.glob(str(HERE / "*/*/*/*.json")):
    if Path(f).name.startswith("manifest"):
        continue
    r = json.load(open(f))[1]
    key = (r["dataset"], Path(f).parts[-3])
    if cache_hit(r):
        cached[key] += 1
        continue
    by[key].append(r["seconds"])
print("| set | method | questions timed | cache hits left out | median s | mean s | max s |")
print("|---|---|---:|---:|---:|---:|---:|")
for k in sorted(set(by) | set(cached)):
    v = by.get(k, [])
    print(f"| {k[0]} | {k[1]} | {len(v)} | {cached[k]} | " + (" | ".join(f"{x:.1f}" for x in (statistics.median(v), statistics.mean(v), max(v)))
                                                           if v else "- | - | -") + " |")
