"""The second index against the first (issue 35): for every set, the questions that vanilla RAG and
medr2 answered from both indexes (runs-gated-ext/ and runs-gated/, loglik, the same seeded order),
accuracy on each with direct answering beside, and paired McNemar tests: each method on the
second index against itself on the first, against direct, and medr2 against vanilla RAG on the
second index. Writes compare.md beside this file.

    python bench/results/eval/runs-gated-ext/compare.py
"""

import json
import sys
from math import comb
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIRST = HERE.parent / "runs-gated"
SETS = ("mmlu", "medqa", "medmcqa", "pubmedqa", "bioasq")


def load(root: Path, dataset: str, method: str) -> dict[str, bool]:
    out = {}
    for f in (root / dataset).glob(f"{method}+loglik/*/*.json"):
        if f.name != "manifest.json":
            r = json.loads(f.read_text())
            r = r[1] if isinstance(r, list) else r
            out[r["id"]] = bool(r["correct"])
    return out


def mcnemar(b: int, c: int) -> float:
    n, k = b + c, min(b, c)
    return 1.0 if n == 0 else min(1.0, 2 * sum(comb(n, i) for i in range(k + 1)) / 2 ** n)


def pair(a: dict, b: dict, keys: list) -> str:
    plus = sum(a[k] and not b[k] for k in keys)
    minus = sum(b[k] and not a[k] for k in keys)
    return f"+{plus} / -{minus} ({mcnemar(plus, minus):.2f})"


def main() -> int:
    lines = ["# The second index against the first (runs-gated-ext/compare.py)", "",
             "Loglik answers; each row holds the questions answered by direct answering and by vanilla RAG and "
             "medr2 on both indexes. Accuracy (%), then paired + / - (exact McNemar p).", "",
             "| set | n | direct | vanilla RAG, 1st / 2nd | medr2, 1st / 2nd | vanilla RAG 2nd vs 1st | medr2 2nd vs 1st "
             "| medr2 2nd vs direct | medr2 vs vanilla RAG, 2nd |", "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    pooled: dict[str, dict] = {k: {} for k in ("d", "v1", "v2", "m1", "m2")}
    for ds in SETS:
        got = {"d": load(FIRST, ds, "direct"), "v1": load(FIRST, ds, "vanilla_rag"), "v2": load(HERE, ds, "vanilla_rag"),
               "m1": load(FIRST, ds, "medr2"), "m2": load(HERE, ds, "medr2")}
        keys = sorted(set.intersection(*(set(v) for v in got.values())))
        if not keys:
            continue
        for k, v in got.items():
            pooled[k].update({(ds, q): v[q] for q in keys})
        acc = {k: 100 * sum(v[q] for q in keys) / len(keys) for k, v in got.items()}
        lines.append(f"| {ds} | {len(keys)} | {acc['d']:.0f} | {acc['v1']:.0f} / {acc['v2']:.0f} | "
                     f"{acc['m1']:.0f} / {acc['m2']:.0f} | {pair(got['v2'], got['v1'], keys)} | "
                     f"{pair(got['m2'], got['m1'], keys)} | {pair(got['m2'], got['d'], keys)} | "
                     f"{pair(got['m2'], got['v2'], keys)} |")
    keys = sorted(pooled["d"])
    if keys:
        acc = {k: 100 * sum(v[q] for q in keys) / len(keys) for k, v in pooled.items()}
        lines.append(f"| all | {len(keys)} | {acc['d']:.1f} | {acc['v1']:.1f} / {acc['v2']:.1f} | "
                     f"{acc['m1']:.1f} / {acc['m2']:.1f} | {pair(pooled['v2'], pooled['v1'], keys)} | "
                     f"{pair(pooled['m2'], pooled['m1'], keys)} | {pair(pooled['m2'], pooled['d'], keys)} | "
                     f"{pair(pooled['m2'], pooled['v2'], keys)} |")
    (HERE / "compare.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
