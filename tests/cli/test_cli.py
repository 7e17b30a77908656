"""The command line as a user runs it: real subprocesses, real index, killed ingestion."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import make_mixed_folder, write_jsonl

pytestmark = pytest.mark.slow

MEDR2 = [sys.executable, "-m", "medr2.cli"]


def run(*args, check=None, timeout=600):
    p = subprocess.run([*MEDR2, *(a if isinstance(a, bytes) else str(a) for a in args)], capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "PYTHONUNBUFFERED": "1"})
    if check is not None:
        assert p.returncode == check, (p.returncode, p.stdout[-2000:], p.stderr[-3000:])
    return p


@pytest.fixture(scope="module")
def cli_index(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli")
    folder = make_mixed_folder(root / "corpus")
    p = run("ingest", folder, "--index", root / "idx", check=3)
    assert "corrupt.pdf" in p.stderr and "latin1.txt" in p.stderr and "partial" in p.stdout
    return root / "idx"


def test_search_json_contract(cli_index):
    p = run("search", "when to stop metformin in kidney disease", "--index", cli_index, "--k", "3", "--json", check=0)
    out = json.loads(p.stdout)
    assert out["query"] == "when to stop metformin in kidney disease"
    assert len(out["hits"]) == 3
    for h in out["hits"]:
        assert {"passage_id", "doc_id", "title", "source_type", "heading_path", "text", "scores"} <= set(h)
        assert {"dense", "dense_rank", "sparse", "sparse_rank", "fused"} <= set(h["scores"])
    assert out["hits"][0]["doc_id"] == "test:metformin-ckd"


def test_search_text_output_and_filters(cli_index):
    p = run("search", "therapy", "--index", cli_index, "--source-type", "paper", check=0)
    assert "[paper]" in p.stdout and "[guideline]" not in p.stdout
    assert "dense=" in p.stdout or "bm25=" in p.stdout


@pytest.mark.parametrize("query", ["", "   ", "x" * 100_000, "\x01\x02\x03 binary", b"\xff\xfe\xfd"])
def test_bad_queries_exit_2_with_message(cli_index, query):
    p = run("search", query, "--index", cli_index, check=2)
    assert p.stderr.startswith("error: the query") and "Traceback" not in p.stderr


def test_missing_index_and_bad_config(tmp_path):
    p = run("search", "x", "--index", tmp_path / "none", check=2)
    assert "no medr2 index" in p.stderr
    cfg = tmp_path / "c.toml"
    cfg.write_text("[fusion]\nmethod = 'borda'\n")
    p = run("search", "x", "--index", tmp_path / "none", "--config", cfg, check=2)
    assert "invalid settings" in p.stderr and "Traceback" not in p.stderr


def test_stats_doc_show_and_remove(cli_index, tmp_path):
    st = json.loads(run("index", "stats", "--index", cli_index, "--json", check=0).stdout)
    assert st["documents"] == 7 and st["passages"] > 0 and st["disk_bytes"]["total"] > 0
    assert "guideline" in st["by_source_type"]
    text = run("index", "stats", "--index", cli_index, check=0).stdout
    assert "passages" in text and "MB" in text
    shown = json.loads(run("doc", "show", "test:metformin-ckd", "--index", cli_index, "--json", check=0).stdout)
    assert shown["document"]["source_type"] == "guideline" and shown["passages"]
    p = run("doc", "remove", "test:metformin-ckd", "nope:1", "--index", cli_index, check=3)
    assert "not found: nope:1" in p.stderr
    out = json.loads(run("search", "metformin eGFR", "--index", cli_index, "--json", check=0).stdout)
    assert all(h["doc_id"] != "test:metformin-ckd" for h in out["hits"])
    st2 = json.loads(run("index", "stats", "--index", cli_index, "--json", check=0).stdout)
    assert st2["documents"] == 6


def test_ingest_mapping_and_formats(tmp_path):
    write_jsonl(tmp_path / "r.jsonl", [{"pmid": "99", "abstract": "Vitamin D supplementation did not prevent "
                                        "fractures in community-dwelling adults.", "yr": 2019}])
    p = run("ingest", tmp_path / "r.jsonl", "--index", tmp_path / "i", "--map", "id=pmid", "--map", "text=abstract",
            "--map", "year=yr", "--source-type", "paper", "--json", check=0)
    rep = json.loads(p.stdout)
    assert rep["documents_added"] == 1 and rep["status"] == "ok"
    out = json.loads(run("search", "vitamin D fractures", "--index", tmp_path / "i", "--json", check=0).stdout)
    assert out["hits"][0]["doc_id"] == "jsonl:99" and out["hits"][0]["source_type"] == "paper"
    p = run("ingest", tmp_path / "r.jsonl", "--index", tmp_path / "i", "--map", "body", check=2)
    assert "FIELD=SOURCE" in p.stderr
    assert "ngc" in run("formats", check=0).stdout


def _passages(index_dir: Path):
    db = sqlite3.connect(str(index_dir / "store.sqlite"))
    try:
        return {r[0]: r[1] for r in db.execute("SELECT passage_id, doc_id FROM passages")}
    finally:
        db.close()


def test_killed_ingestion_resumes_to_the_same_index(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for f in range(3):
        write_jsonl(corpus / f"part{f}.jsonl", [
            {"id": f"d{f}-{i}", "title": f"Topic {f}-{i}",
             "text": f"Document {f}-{i} describes disease {i} in cohort {f}. " * 3} for i in range(40)])
    cfg = tmp_path / "small.toml"
    cfg.write_text("[ingest]\nbatch_passages = 10\n")

    # reference: one uninterrupted run
    run("ingest", corpus, "--index", tmp_path / "ref", "--config", cfg, check=0)
    ref = _passages(tmp_path / "ref")
    assert len(ref) == 120

    # killed run: SIGKILL once a few batches are committed
    target = tmp_path / "killed"
    proc = subprocess.Popen([*MEDR2, "ingest", str(corpus), "--index", str(target), "--config", str(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    committed = 0
    while time.time() < deadline and proc.poll() is None:
        if (target / "store.sqlite").exists():
            try:
                committed = len(_passages(target))
            except sqlite3.Error:
                committed = 0
            if committed >= 30:
                break
        time.sleep(0.05)
    assert proc.poll() is None, "ingestion finished before it could be killed"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = _passages(target)
    assert 0 < len(partial) < 120
    assert set(partial) <= set(ref)  # committed state is consistent: no half batches

    # the killed index is usable as it is
    out = json.loads(run("search", "disease 3 cohort 0", "--index", target, "--json", check=0).stdout)
    assert out["hits"]

    # the same command resumes and ends with the same index
    run("ingest", corpus, "--index", target, "--config", cfg, check=0)
    assert _passages(target) == ref
    st = json.loads(run("index", "stats", "--index", target, "--json", check=0).stdout)
    assert sum(s["live"] for s in st["segments"]) == 120  # no duplicate rows in the segments
    a = json.loads(run("search", "disease 7 in cohort 2", "--index", target, "--json", check=0).stdout)
    b = json.loads(run("search", "disease 7 in cohort 2", "--index", tmp_path / "ref", "--json", check=0).stdout)
    assert a["hits"][0]["passage_id"] == b["hits"][0]["passage_id"]
