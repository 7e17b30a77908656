"""Score MIRAGE's own stored predictions with MIRAGE's extraction rules.

Layout: ``PRED/<dataset>/<setting...>/OpenAI/<model>/[<corpus>/<retriever>/]<split>_<id>.json``
(the setting is the path between the dataset and the model, e.g. ``cot`` or
``rag_32/medcorp/RRF-4`` once the corpus/retriever part is folded in); each file is a JSON list
whose first string holds ``"answer_choice": "..."``.

Example::

    >>> from medr2.eval.mirage import question_id
    >>> question_id("test_anatomy-002.json"), question_id("dev_0009b2fd-7e72.json")
    ('anatomy-002', '0009b2fd-7e72')
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from medr2.eval.scoring import accuracy, mirage_letter


# MIRAGE's published accuracies (percent, full test sets: MMLU-Med 1,089, MedQA-US 1,273, MedMCQA
# dev 4,183, PubMedQA* 500, BioASQ-Y/N 618) for the two models whose predictions MIRAGE ships.
# Source: the authors' leaderboard, github.com/Teddy-XiongGZ/MIRAGE docs/index.html (commits
# 1d75fb2e and 42b60ff7 agree); "rag_32/medcorp/RRF-4" is MedRAG with the MedCorp corpus and
# the RRF-4 retriever. The leaderboard gives no std.
PUBLISHED = {
    ("cot", "gpt-35-turbo-16k"): {"mmlu": 72.91, "medqa": 65.04, "medmcqa": 55.25, "pubmedqa": 36.00,
                                  "bioasq": 74.27},
    ("rag_32/medcorp/RRF-4", "gpt-35-turbo-16k"): {"mmlu": 75.48, "medqa": 66.61, "medmcqa": 58.04,
                                                   "pubmedqa": 67.40, "bioasq": 90.29},
    ("cot", "gpt-4-32k"): {"mmlu": 89.44, "medqa": 83.97, "medmcqa": 69.88, "pubmedqa": 39.60, "bioasq": 84.30},
    ("rag_32/medcorp/RRF-4", "gpt-4-32k"): {"mmlu": 87.24, "medqa": 82.80, "medmcqa": 66.65, "pubmedqa": 70.60,
                                            "bioasq": 92.56},
}
FULL_SIZES = {"mmlu": 1089, "medqa": 1273, "medmcqa": 4183, "pubmedqa": 500, "bioasq": 618}


def published(row: dict) -> float | None:
    """MIRAGE's published accuracy for a scored row's dataset, setting and model, if it has one.

    >>> published({"dataset": "mmlu", "setting": "cot", "model": "gpt-4-32k"})
    89.44
    """
    return PUBLISHED.get((row["setting"], row["model"]), {}).get(row["dataset"])


def question_id(filename: str) -> str:
    stem = filename[:-5] if filename.endswith(".json") else filename
    return stem.split("_", 1)[1] if "_" in stem else stem


def read_prediction(path: Path) -> str:
    """The first string of a prediction file ('' when empty or unreadable: scored wrong)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return ""
    if isinstance(data, list) and data and isinstance(data[0], str):
        return data[0]
    return data if isinstance(data, str) else ""


def score_predictions(pred_dir: str | Path, benchmark: dict) -> list[dict]:
    """Rows {dataset, setting, model, n, accuracy (percent), std (percent)}."""
    root = Path(pred_dir)
    if (root / "prediction").is_dir():
        root = root / "prediction"
    groups: dict[tuple[str, str, str], list[bool]] = defaultdict(list)
    for f in sorted(root.rglob("*.json")):
        parts = f.relative_to(root).parts
        if len(parts) < 4 or parts[0] not in benchmark:
            continue
        dataset = parts[0]
        try:
            i = parts.index("OpenAI")
        except ValueError:
            i = len(parts) - 3
        model = parts[i + 1] if i + 1 < len(parts) - 1 else "unknown"
        setting = "/".join(list(parts[1:i]) + list(parts[i + 2:-1]))
        gold = benchmark[dataset].get(question_id(f.name))
        if gold is None:
            continue
        text = read_prediction(f)
        groups[(dataset, setting, model)].append(bool(text) and mirage_letter(text) == gold["answer"])
    rows = []
    for (dataset, setting, model), marks in sorted(groups.items()):
        acc, std = accuracy(marks)
        rows.append({"dataset": dataset, "setting": setting, "model": model, "n": len(marks),
                     "accuracy": round(acc * 100, 2), "std": round(std * 100, 2)})
    return rows
