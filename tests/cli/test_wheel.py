"""medr2 installed like a library: a wheel built from the source tree, installed with the
``serve`` extra into a fresh virtual environment (no system site-packages; the exact versions
from requirements.lock as constraints), then run from outside the source tree: ``medr2 ingest``
of the demo corpus shipped in the wheel and ``medr2 serve`` answering ``/health`` and
``/search``.

Slow (a few minutes: the fresh environment installs torch and the rest); set
``MEDR2_SKIP_WHEEL_TEST=1`` to skip it. Needs ``build`` and setuptools (the dev extra)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOCK = ROOT / "requirements.lock"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(os.environ.get("MEDR2_SKIP_WHEEL_TEST") == "1",
                       reason="MEDR2_SKIP_WHEEL_TEST=1: the wheel build-and-install test is switched off"),
]


def sh(*cmd, timeout: int, **kw) -> subprocess.CompletedProcess:
    """Run ``cmd``; a non-zero exit fails the test with the end of its output."""
    p = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)
    assert p.returncode == 0, f"{cmd[:4]} exited {p.returncode}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    return p


def build_wheel(tmp: Path) -> Path:
    """The wheel of a clean copy of the source tree (the checkout gets no build/ or egg-info)."""
    assert importlib.util.find_spec("build"), "needs `build` (the dev extra): make install"
    src = tmp / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build", "dist")
    shutil.copytree(ROOT / "src", src / "src", ignore=skip)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    sh(sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", tmp / "dist", src, timeout=600)
    (wheel,) = (tmp / "dist").glob("medr2-*.whl")
    return wheel


def shipped_files() -> set[str]:
    """Every data file of the package in the source tree (what importlib.resources and
    Path(__file__) read: the demo corpus, models, classifier data, the web page)."""
    pkg = ROOT / "src"
    return {p.relative_to(pkg).as_posix() for p in (pkg / "medr2").rglob("*")
            if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url: str, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, json.loads(r.read())


def wait_for_health(url: str, proc: subprocess.Popen, log: Path, timeout_s: float = 300) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"medr2 serve exited {proc.returncode}:\n{log.read_text()[-3000:]}"
        try:
            status, out = http(url)
            assert status == 200, (status, out)
            return out
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            time.sleep(1)
    pytest.fail(f"no answer from {url} in {timeout_s:.0f} s:\n{log.read_text()[-3000:]}")


def test_wheel_installs_and_serves(tmp_path):
    wheel = build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert not shipped_files() - names, f"data files missing from the wheel: {sorted(shipped_files() - names)}"

    venv = tmp_path / "venv"
    sh(sys.executable, "-m", "venv", venv, timeout=300)  # no --system-site-packages
    py, medr2 = venv / "bin" / "python", venv / "bin" / "medr2"
    sh(py, "-m", "pip", "install", "--quiet", "--no-compile", "-c", LOCK, f"{wheel}[serve]", timeout=1200)

    work = tmp_path / "work"  # outside the source tree: nothing can import the checkout
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
    env.update(MEDR2_HOME=str(tmp_path / "home"), PYTHONUNBUFFERED="1",
               PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}")
    run = dict(cwd=work, env=env)
    where = sh(py, "-c", "import medr2, medr2.demo as d; print(medr2.__file__); print(d.CORPUS)", timeout=60, **run)
    module, corpus = where.stdout.split()
    assert Path(module).is_relative_to(venv) and Path(corpus).is_relative_to(venv), where.stdout

    index = tmp_path / "index"
    sh(medr2, "ingest", corpus, "--index", index, "--no-progress", timeout=900, **run)

    port, log = free_port(), tmp_path / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen([str(medr2), "serve", "--index", str(index), "--llm", "none", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, **run)
    try:
        health = wait_for_health(f"http://127.0.0.1:{port}/health", proc, log)
        assert health["status"] == "ok" and health["documents"] > 0, health
        status, res = http(f"http://127.0.0.1:{port}/search", {"query": "metformin in kidney disease", "k": 3})
        assert status == 200 and res["hits"], res
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    shutil.rmtree(venv, ignore_errors=True)  # about 1.5 GB; kept when the test fails, to look at
