"""Issue 36, tried on dev and not adopted (bench/README.md, "Recommendation answers"): does the
bundled generator's P(" yes") pick the recommendation a guideline question needs better than the
shipped statement relevance (0.25 x cross-encoder + 0.75 x term overlap)?

    python bench/results/guideline-judge/judge.py score     # P(yes) for every collected dev candidate
    python bench/results/guideline-judge/judge.py analyze   # top-1 and within-question AUC by score

Reads the dev rows of ``bench/out/guideline/cands-passage-sect3.jsonl`` (``bench/guideline.py
collect --tag -sect3``, passage mode); writes ``llm-dev.jsonl`` here (resumable). A candidate is
labelled relevant when its passage holds a required recommendation (as in the trust metrics).
"""
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "src"))
SRC = ROOT / "bench" / "out" / "guideline" / "cands-passage-sect3.jsonl"
OUT = Path(__file__).resolve().parent / "llm-dev.jsonl"


def prompt(question: str, statement: str) -> str:
    return (f"Question: {question}\n\nGuideline recommendation: {' '.join(statement.split())}\n\n"
            "Does this recommendation answer the question? Answer yes or no.\nAnswer:")


def dev_rows() -> list[dict]:
    rows = [json.loads(x) for x in SRC.read_text(encoding="utf-8").splitlines() if x.strip()]
    return [r for r in rows if r["dev"] and not r["unanswerable"]]


def score() -> None:
    from medr2.config import Config
    from medr2.llm.factory import load_llm
    from medr2.search.llm_rerank import p_yes

    llm = load_llm("local", Config().llm)
    done = {json.loads(x)["id"] for x in OUT.read_text().splitlines()} if OUT.exists() else set()
    t0 = time.time()
    with OUT.open("a", encoding="utf-8") as f:
        for i, r in enumerate(dev_rows()):
            if r["id"] in done:
                continue
            ps = []
            for c in r["cands"]:
                p = prompt(r["question"], c["statement"])
                ps.append(p_yes(sum(llm.continuation_logprobs(p, " yes")), sum(llm.continuation_logprobs(p, " no"))))
            f.write(json.dumps({"id": r["id"], "llm": ps}) + "\n")
            f.flush()
            print(i, r["id"], len(ps), f"{time.time() - t0:.0f} s", flush=True)


def auc(pos: list[float], neg: list[float]) -> float:
    return sum((p > n) + 0.5 * (p == n) for p in pos for n in neg) / (len(pos) * len(neg))


def analyze() -> None:
    rows = {r["id"]: r for r in dev_rows()}
    judged = [json.loads(x) for x in OUT.read_text(encoding="utf-8").splitlines() if x.strip()]
    shipped = lambda x: 0.25 * x["rel"] + 0.75 * x["ov"]  # [recommend] overlap_weight 0.75
    scores = {"term overlap": lambda r, j: [x["ov"] for x in r["cands"]],
              "cross-encoder": lambda r, j: [x["rel"] for x in r["cands"]],
              "shipped (0.25 ce + 0.75 overlap)": lambda r, j: [shipped(x) for x in r["cands"]],
              "cosine (MiniLM)": lambda r, j: [x["sim"] or 0.0 for x in r["cands"]],
              "LLM P(yes)": lambda r, j: j["llm"],
              "0.5 LLM + 0.5 shipped": lambda r, j: [0.5 * l + 0.5 * shipped(x) for l, x in zip(j["llm"], r["cands"])]}
    print("| score | top-1 statement's passage holds a required one | within-question AUC |\n|---|---:|---:|")
    for name, f in scores.items():
        top, n, aucs = 0, 0, []
        for j in judged:
            r = rows[j["id"]]
            lab = [any(r["passages"][x["passage_id"]]) for x in r["cands"]]
            if not any(lab):
                continue
            s = f(r, j)
            n += 1
            top += lab[max(range(len(s)), key=lambda i: s[i])]
            if not all(lab):
                aucs.append(auc([v for v, y in zip(s, lab) if y], [v for v, y in zip(s, lab) if not y]))
        print(f"| {name} | {top} / {n} ({top / n:.0%}) | {sum(aucs) / len(aucs):.3f} |")


if __name__ == "__main__":
    {"score": score, "analyze": analyze}[sys.argv[1]]()
