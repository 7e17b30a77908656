"""The command line without an extra: an error naming it, exit code 1, no traceback. The child
process blocks the extra's modules (``sys.modules[NAME] = None``: the import fails as if the
package were not installed) and runs ``medr2``."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHILD = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
from medr2.cli import main
main(sys.argv[2:], prog_name="medr2")
"""


def medr2_without(modules: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, modules, *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("modules", ["fastapi", "uvicorn", "python_multipart"])
def test_serve_names_the_serve_extra(tmp_path, modules):
    p = medr2_without(modules, "serve", "--index", str(tmp_path / "none"))
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert p.stderr.startswith("error: medr2 serve needs the 'serve' extra: pip install 'medr2[serve]'"), p.stderr
    assert "Traceback" not in p.stderr


def test_help_works_without_the_extra():
    p = medr2_without("fastapi,uvicorn", "serve", "--help")
    assert p.returncode == 0, p.stderr
    assert "medr2[serve]" in " ".join(p.stdout.split())


def test_ingest_into_milvus_names_the_milvus_extra(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("# Metformin\n\nMetformin is first-line therapy for type 2 diabetes.\n", encoding="utf-8")
    p = medr2_without("pymilvus", "ingest", str(doc), "--index", str(tmp_path / "idx"), "--backend", "milvus",
                      "--no-progress")
    assert p.returncode in (1, 2), (p.stdout, p.stderr)
    assert "pip install 'medr2[milvus]'" in p.stderr and "Traceback" not in p.stderr
