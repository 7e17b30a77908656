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
