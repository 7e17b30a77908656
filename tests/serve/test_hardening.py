"""The service under hostile or concurrent use (issue 38, section 4): bodies over the limit sent
without Content-Length, validation errors that must not echo their input, lone surrogates,
another process writing the index, failed uploads, and contradictory search filters."""

import asyncio
import json
import time

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient  # noqa: E402

from medr2.serve.app import BODY_LIMIT, create_app  # noqa: E402
from test_serve import AUTH, TEST_HOSTS, TOKEN, served  # noqa: E402,F401  (served: a private copy of the demo index)


@pytest.fixture()
def client(served, monkeypatch):  # noqa: F811
    """Server errors come back as responses (500), as a real server sends them."""
    monkeypatch.setenv("MEDR2_API_TOKEN", TOKEN)
    app = create_app(served, generator="none", scorer="none", trusted_hosts=TEST_HOSTS)
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def wait_job(client, job_id: str) -> dict:
    for _ in range(240):
        st = client.get(f"/jobs/{job_id}").json()
        if st["status"] in ("done", "failed"):
            return st
        time.sleep(0.25)
    raise AssertionError(f"job {job_id} did not finish: {st}")


# 1. the body limit holds for chunked bodies; validation errors do not echo the input ------------

def test_chunked_body_over_the_limit_is_refused_while_read(client):
    pad = b"x" * (3 << 20)
    body = iter([b'{"query": 1, "pad": "', pad, b'"}'])  # a generator: chunked, no Content-Length
    r = client.post("/search", content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and len(r.content) < 1000, (r.status_code, len(r.content))


def test_body_limit_stops_reading_at_the_limit(served, monkeypatch):  # noqa: F811
    import httpx

    monkeypatch.setenv("MEDR2_API_TOKEN", TOKEN)
    app = create_app(served, generator="none", scorer="none", trusted_hosts=["t"])
    pulled = []

    async def forty_mb():
        yield b'{"query": "'
        for i in range(640):  # 40 MB in 64 KiB chunks
            pulled.append(i)
            yield b"a" * (1 << 16)
        yield b'"}'

    async def go():
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            return await c.post("/search", content=forty_mb(), headers={"Content-Type": "application/json"})

    try:
        r = asyncio.run(go())
    finally:
        app.state.serve.close()
    assert r.status_code == 413 and len(r.content) < 1000
    assert len(pulled) <= BODY_LIMIT // (1 << 16) + 2, f"{len(pulled)} chunks read"


def test_validation_errors_do_not_echo_the_input(client):
    big = "y" * 900_000  # under the limit: parsed, and refused for the unknown field
    r = client.post("/search", json={"query": "metformin", "bogus": big})
    assert r.status_code == 422 and len(r.content) < 2000, len(r.content)
    assert r.json()["detail"] and all("input" not in d for d in r.json()["detail"])
    assert "bogus" in r.text
    r = client.post("/search", json={"query": "metformin", "source_types": ["z" * 500_000]})
    assert r.status_code == 422 and len(r.content) < 2000, len(r.content)


# 2. lone surrogates -------------------------------------------------------------------------

@pytest.mark.parametrize("path,body", [
    ("/search", b'{"query": "\\ud800abc"}'),
    ("/ask", b'{"question": "\\ud800abc"}'),
    ("/ask/stream", b'{"question": "\\ud800abc"}'),
    ("/ask", b'{"question": "ok?", "options": {"\\udc00": "x"}}'),
    ("/search", b'{"query": "x", "\\ud800": 1}'),
])
def test_lone_surrogates_are_refused_with_422(client, path, body):
    r = client.post(path, content=body, headers={"Content-Type": "application/json"})
    assert r.status_code == 422, (r.status_code, r.text[:300])
    assert len(r.content) < 2000
    assert client.get("/health").status_code == 200


# 3. removal while another process writes ----------------------------------------------------

def test_delete_while_another_process_writes_gives_409(client, served):  # noqa: F811
    from medr2.locks import try_lock

    held = try_lock(served / ".lock")  # what Index.open(writable=True) takes in the other process
    assert held is not None
    try:
        r = client.delete("/documents/demo:entry-type-2-diabetes", headers=AUTH)
    finally:
        held.close()
    assert r.status_code == 409, (r.status_code, r.text[:300])
    assert "another process" in r.json()["detail"] and str(served) not in r.text


# 4. documents ingested by another process are searchable ------------------------------------

def test_search_sees_documents_another_process_ingested(client, served, tmp_path):  # noqa: F811
    from medr2.index.index import Index
    from medr2.ingest.pipeline import ingest

    q = {"query": "zolgensma onasemnogene spinal muscular atrophy", "k": 3}
    assert client.post("/search", json=q).status_code == 200  # the engine is open before the write
    f = tmp_path / "sma.md"
    f.write_text("---\nid: ext:sma\ntitle: Onasemnogene for SMA\nsource_type: guideline\n---\n# SMA\n\n"
                 "Onasemnogene abeparvovec (Zolgensma) treats spinal muscular atrophy in infants.\n")
    with Index.open(served, writable=True) as idx:
        assert ingest(idx, [f], progress=False).documents_added == 1
    try:
        assert client.get("/documents?limit=1000").json()["total"] == client.get("/health").json()["documents"]
        hits = client.post("/search", json=q).json()["hits"]
        assert hits and hits[0]["doc_id"] == "ext:sma", [h["doc_id"] for h in hits]
    finally:
        with Index.open(served, writable=True) as idx:
            idx.remove_documents(["ext:sma"])
    hits = client.post("/search", json=q).json()["hits"]
    assert all(h["doc_id"] != "ext:sma" for h in hits)


# 5. failed uploads --------------------------------------------------------------------------

def test_failed_upload_is_reported_failed_without_server_paths(client):
    r = client.post("/documents", files={"file": ("broken.pdf", b"%PDF-1.4 this is not a pdf")}, headers=AUTH)
    assert r.status_code == 202
    st = wait_job(client, r.json()["job"]["id"])
    text = json.dumps(st)
    assert st["status"] == "failed", text
    assert "broken.pdf" in text and "medr2-upload" not in text and "/tmp" not in text and "--format" not in text


def test_unsupported_upload_type_is_refused_with_415(client):
    from medr2.ingest.loaders.base import loaders

    r = client.post("/documents", files={"file": ("notes.xyz", b"some notes")}, headers=AUTH)
    assert r.status_code == 415, (r.status_code, r.text[:300])
    detail = r.json()["detail"]
    assert ".xyz" in detail and all(s in detail for ld in loaders().values() for s in ld.suffixes)
    assert client.post("/documents", files={"file": ("README", b"notes")}, headers=AUTH).status_code == 415


# 6. contradictory or unknown search filters -------------------------------------------------

def test_search_filters_that_cannot_match_are_refused(client):
    r = client.post("/search", json={"query": "metformin", "year_min": 2020, "year_max": 2010})
    assert r.status_code == 422 and "year_min" in r.text and "year_max" in r.text
    r = client.post("/search", json={"query": "metformin", "languages": ["xx"]})
    assert r.status_code == 422 and "languages" in r.text and "xx" in r.text
    ok = client.post("/search", json={"query": "metformin", "languages": ["en"], "year_min": 2000, "year_max": 2030})
    assert ok.status_code == 200


# 7. only trusted Host headers are served ----------------------------------------------------

def _config(tmp_path, serve_toml: str):
    from medr2.config import Config

    p = tmp_path / "serve.toml"
    p.write_text("[serve]\n" + serve_toml)
    return Config.load(p)


def test_an_untrusted_host_header_gets_400(served, monkeypatch):  # noqa: F811
    monkeypatch.setenv("MEDR2_API_TOKEN", TOKEN)
    app = create_app(served, generator="none", scorer="none")  # the default: loopback names only
    with TestClient(app, base_url="http://localhost") as c:
        assert c.get("/health").status_code == 200
        for host in ("localhost:8000", "127.0.0.1:8000", "[::1]:8000", "LOCALHOST"):
            assert c.get("/health", headers={"Host": host}).status_code == 200, host
        for host in ("evil.example", "evil.example:8000", "testserver", "localhost.evil.example"):
            r = c.post("/search", json={"query": "metformin"}, headers={"Host": host})
            assert r.status_code == 400, (host, r.status_code)


def test_the_bind_address_and_configured_hosts_are_trusted(served, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setenv("MEDR2_API_TOKEN", TOKEN)
    cfg = _config(tmp_path, 'host = "10.1.2.3"\ntrusted_hosts = ["medr2.example.org", "*.ward.example"]\n')
    with TestClient(create_app(served, cfg, generator="none", scorer="none")) as c:
        for host, status in [("10.1.2.3:8000", 200), ("medr2.example.org", 200), ("a.ward.example", 200),
                             ("localhost", 400), ("evil.example", 400)]:
            assert c.get("/health", headers={"Host": host}).status_code == status, host
    with TestClient(create_app(served, generator="none", scorer="none", host="0.0.0.0")) as c:
        assert c.get("/health", headers={"Host": "0.0.0.0"}).status_code == 400  # a wildcard is no name


def test_a_star_trusts_any_host(served, monkeypatch, tmp_path):  # noqa: F811
    monkeypatch.setenv("MEDR2_API_TOKEN", TOKEN)
    with TestClient(create_app(served, _config(tmp_path, 'trusted_hosts = ["*"]\n'), generator="none",
                               scorer="none")) as c:
        assert c.get("/health", headers={"Host": "evil.example"}).status_code == 200


def test_serve_command_passes_host_and_trusted_hosts(served, monkeypatch):  # noqa: F811
    import uvicorn
    from click.testing import CliRunner

    from medr2.cli import main

    bad = CliRunner().invoke(main, ["serve", "--index", str(served), "--trusted-host", "evil*"])
    assert bad.exit_code == 2 and "evil*" in bad.output
    started = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: started.update(app=app, **kw))
    r = CliRunner().invoke(main, ["serve", "--index", str(served), "--llm", "none", "--scorer", "none",
                                  "--host", "10.1.2.3", "--trusted-host", "medr2.example.org",
                                  "--trusted-host", "ward.example"])
    assert r.exit_code == 0, r.output
    assert started["host"] == "10.1.2.3"
    with TestClient(started["app"]) as c:
        for host, status in [("medr2.example.org", 200), ("ward.example", 200), ("10.1.2.3", 200),
                             ("localhost", 400), ("evil.example", 400)]:
            assert c.get("/health", headers={"Host": host}).status_code == status, host
