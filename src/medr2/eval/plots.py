"""The report's figures (matplotlib, drawn off-screen): accuracy bars by method and dataset, and
the gain heatmap by model and context window.

Example::

    >>> import tempfile
    >>> from pathlib import Path
    >>> from medr2.eval.plots import plot_bars
    >>> rows = [{"model": "m", "dataset": "medqa", "method": "direct", "accuracy": 44.0, "std": 5.0},
    ...         {"model": "m", "dataset": "medqa", "method": "medr2", "accuracy": 47.0, "std": 5.0}]
    >>> png = Path(tempfile.mkdtemp()) / "bars.png"
    >>> plot_bars(rows, "m", png, ["direct", "medr2"])
    >>> png.read_bytes()[1:4]
    b'PNG'
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from medr2.util.extras import require


def plot_bars(rows: list[dict], model: str, path: Path, methods: list[str]) -> None:
    """Accuracy bars (with their standard error) of ``methods``, in that order, per dataset."""
    matplotlib = require("matplotlib", "report", "the plots of medr2 eval report")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    mine = [r for r in rows if r["model"] == model]
    datasets = sorted({r["dataset"] for r in mine})
    width = 0.8 / max(len(methods), 1)
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(datasets) + 2), 4))
    for i, m in enumerate(methods):
        vals = [next((r["accuracy"] for r in mine if r["method"] == m and r["dataset"] == d), 0.0) for d in datasets]
        errs = [next((r["std"] for r in mine if r["method"] == m and r["dataset"] == d), 0.0) for d in datasets]
        ax.bar([x + i * width for x in range(len(datasets))], vals, width, yerr=errs, label=m, capsize=2)
    ax.set_xticks([x + width * (len(methods) - 1) / 2 for x in range(len(datasets))], datasets)
    ax.set_ylabel("accuracy (%)")
    ax.set_title(f"Accuracy by method ({model})")
    ax.legend(fontsize=8, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_heatmap(grid: dict[tuple[str, Optional[int]], float], path: Path) -> None:
    """Med-R2's Figure 5 layout: medr2's gain over direct answering by model and context window."""
    matplotlib = require("matplotlib", "report", "the plots of medr2 eval report")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = sorted({m for m, _ in grid})
    ctxs = sorted({c for _, c in grid}, key=lambda c: (c is None, c))
    data = [[grid.get((m, c), float("nan")) for c in ctxs] for m in models]
    fig, ax = plt.subplots(figsize=(1.5 * len(ctxs) + 3, 0.8 * len(models) + 2))
    im = ax.imshow(data, cmap="RdYlGn", aspect="auto")
    ax.set_xticks(range(len(ctxs)), [str(c) for c in ctxs])
    ax.set_yticks(range(len(models)), models)
    ax.set_xlabel("context window (tokens)")
    for i, row in enumerate(data):
        for j, v in enumerate(row):
            if v == v:
                ax.text(j, i, f"{v:+.1f}", ha="center", va="center", fontsize=9)
    fig.colorbar(im, label="medr2 - direct, same answer mode (accuracy points)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
