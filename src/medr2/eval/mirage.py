"""Score MIRAGE's own stored predictions with MIRAGE's extraction rules.

Layouts:

* MIRAGE's: ``PRED/<dataset>/<setting...>/OpenAI/<model>/[<corpus>/<retriever>/]<split>_<id>.json``
  (the setting is the path between the dataset and the model, e.g. ``cot`` or
  ``rag_32/medcorp/RRF-4`` once the corpus/retriever part is folded in);
* medr2's runs: ``RUN/<dataset>/<method>/<model>/<id>.json`` (the setting is the method).

Each file is a JSON list whose first string holds ``"answer_choice": "..."``. A file with no
string (empty, ``[]``, unreadable) is wrong; any string, ``""`` too, goes through MIRAGE's rules
(which default to "A"). Rows state how many of the benchmark's questions had no file
(``missing``): the accuracy is over the files found.

Example::

    >>> from medr2.eval.mirage import question_id
    >>> question_id("test_anatomy-002.json"), question_id("dev_0009b2fd-7e72.json"), question_id("q_1.json")
    ('anatomy-002', '0009b2fd-7e72', 'q_1')
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


SPLITS = ("test_", "dev_", "train_")


def question_id(filename: str) -> str:
    """The question id of a prediction file: MIRAGE's names carry the split before it."""
    stem = filename[:-5] if filename.endswith(".json") else filename
    return next((stem[len(p):] for p in SPLITS if stem.startswith(p)), stem)


def read_prediction(path: Path) -> str | None:
    """The first string of a prediction file; None when it holds none (empty, ``[]``, unreadable:
    scored wrong)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    if isinstance(data, list) and data and isinstance(data[0], str):
        return data[0]
    return data if isinstance(data, str) else None


def locate(parts: tuple[str, ...]) -> tuple[str, str]:
    """(setting, model) of a prediction file's path below the prediction root.

    >>> locate(("mmlu", "rag_32", "OpenAI", "gpt-4-32k", "medcorp", "RRF-4", "test_a.json"))
    ('rag_32/medcorp/RRF-4', 'gpt-4-32k')
    >>> locate(("mmlu", "vanilla_rag", "qwen", "a.json"))
    ('vanilla_rag', 'qwen')
    """
    if "OpenAI" in parts[1:-1]:
        i = parts.index("OpenAI", 1)
        return "/".join(list(parts[1:i]) + list(parts[i + 2:-1])), parts[i + 1]
    return "/".join(parts[1:-2]), parts[-2]


def score_predictions(pred_dir: str | Path, benchmark: dict) -> list[dict]:
    """Rows {dataset, setting, model, n, accuracy (percent), std (percent), missing}: ``n`` files
    scored, ``missing`` questions of the benchmark without a file."""
    root = Path(pred_dir)
    if (root / "prediction").is_dir():
        root = root / "prediction"
    groups: dict[tuple[str, str, str], dict[str, bool]] = defaultdict(dict)
    for f in sorted(root.rglob("*.json")):
        parts = f.relative_to(root).parts
        if len(parts) < 4 or parts[0] not in benchmark or f.name.startswith("manifest"):
            continue
        dataset = parts[0]
        qid = question_id(f.name)
        gold = benchmark[dataset].get(qid) or benchmark[dataset].get(f.name[:-5])
        if gold is None:
            continue
        text = read_prediction(f)
        groups[(dataset, *locate(parts))][qid] = text is not None and mirage_letter(text) == gold["answer"]
    rows = []
    for (dataset, setting, model), marks in sorted(groups.items()):
        acc, std = accuracy(list(marks.values()))
        rows.append({"dataset": dataset, "setting": setting, "model": model, "n": len(marks),
                     "accuracy": round(acc * 100, 2), "std": round(std * 100, 2),
                     "missing": len(benchmark[dataset]) - len(marks)})
    return rows
