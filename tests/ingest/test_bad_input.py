"""Bad input at scale: huge files and a directory of 10,000 files with a few bad ones."""


import numpy as np
from conftest import small_config

from medr2.index.index import Index
from medr2.ingest.pipeline import ingest


class ZeroVectorEncoderFake:
    """Fake dense encoder for plumbing tests: zero vectors, no model (file handling is under test)."""

    dim = 384
    name = "fake"

    def encode_passages(self, texts, show_progress=False):
        return np.zeros((len(texts), self.dim), dtype=np.float32)


def _fake_index(path, **kw):
    idx = Index.open(path, small_config(**kw), create=True, writable=True)
    idx._encoder = ZeroVectorEncoderFake()
    return idx


def test_200mb_text_file_is_refused_with_its_size_and_the_rest_ingested(tmp_path):
    big = tmp_path / "in" / "huge.txt"
    big.parent.mkdir()
    with big.open("wb") as fh:
        fh.truncate(200 * 1024 * 1024)  # sparse file: 200 MB without writing them
    (tmp_path / "in" / "ok.md").write_text("# Gout\n\nAllopurinol lowers urate.\n")
    idx = _fake_index(tmp_path / "i")
    try:
        rep = ingest(idx, [tmp_path / "in"], progress=False)
        assert rep.status == "partial"
        (fail,) = rep.failed_files
        assert fail.path.endswith("huge.txt") and "210 MB" in fail.reason and "max_whole_file_mb" in fail.reason
        assert idx.stats()["documents"] == 1
    finally:
        idx.close()


def test_large_jsonl_streams_whatever_its_size(tmp_path):
    p = tmp_path / "big.jsonl"
    with p.open("w") as fh:
        for i in range(3000):
            fh.write('{"id": "%d", "text": "Record %d about hypertension and kidney disease."}\n' % (i, i))
    cfg_limit_mb = 0  # below the file's size: streaming formats are not limited
    idx = _fake_index(tmp_path / "i", batch_passages=500)
    idx.config.ingest.max_whole_file_mb = cfg_limit_mb
    try:
        rep = ingest(idx, [p], progress=False)
        assert rep.status == "ok" and rep.documents_added == 3000
        assert len(idx.segments) < 3000 // 500  # committed in batches, merged in tiers
    finally:
        idx.close()


def test_directory_of_10000_files_with_a_few_bad_ones(tmp_path):
    root = tmp_path / "many"
    for d in range(10):
        (root / f"d{d}").mkdir(parents=True)
    bad = {}
    for i in range(10_000):
        p = root / f"d{i % 10}" / f"note{i:05d}.txt"
        if i % 2000 == 7:
            p.write_bytes(b"\xff\xfe not utf-8 \x81")
            bad[str(p)] = "UTF-8"
        elif i % 2000 == 11:
            p.write_text("")
            bad[str(p)] = "empty"
        else:
            p.write_text(f"Note {i}: patient reviewed for condition {i % 97}.")
    idx = _fake_index(tmp_path / "i", batch_passages=1024)
    try:
        rep = ingest(idx, [root], progress=False)
        assert rep.status == "partial" and rep.exit_code == 3
        assert {f.path: next(k for k in ("UTF-8", "empty") if k in f.reason) for f in rep.failed_files} == bad
        assert rep.files_ingested == 10_000 - len(bad)
        st = idx.stats()
        assert st["documents"] == 10_000 - len(bad) and st["passages"] == 10_000 - len(bad)
        assert len(idx.segments) <= 12
        # a second run touches nothing that was stored
        rep2 = ingest(idx, [root], progress=False)
        assert rep2.files_unchanged == 10_000 - len(bad) and rep2.passages_added == 0
        assert idx.stats()["passages"] == st["passages"]
    finally:
        idx.close()


def test_index_inside_the_ingested_folder_is_skipped(tmp_path):
    (tmp_path / "a.md").write_text("# Asthma\n\nInhaled corticosteroids control asthma.\n")
    idx = _fake_index(tmp_path / "idx")
    try:
        ingest(idx, [tmp_path], progress=False)
        rep = ingest(idx, [tmp_path], progress=False)  # the index now has segment files
        assert rep.failed_files == [] and rep.record_problems == []
        assert idx.stats()["documents"] == 1
    finally:
        idx.close()


def test_a_document_two_files_provide_survives_changes_in_one(tmp_path):
    doc = "---\nid: shared:1\n---\n# Gout\n\n{}\n"
    (tmp_path / "a.md").write_text(doc.format("Allopurinol lowers urate in gout."))
    (tmp_path / "b.md").write_text(doc.format("Allopurinol lowers urate in gout."))
    idx = _fake_index(tmp_path / "idx")
    try:
        ingest(idx, [tmp_path / "a.md", tmp_path / "b.md"], progress=False)
        (tmp_path / "a.md").write_text(doc.format("Allopurinol lowers urate in chronic gout."))
        rep = ingest(idx, [tmp_path / "a.md"], progress=False)
        assert rep.documents_updated == 1
        (tmp_path / "a.md").write_text("---\nid: other:2\n---\n# Other\n\nColchicine treats gout flares.\n")
        rep = ingest(idx, [tmp_path / "a.md"], progress=False)
        assert rep.documents_removed == 0  # b.md still provides shared:1
        assert idx.store.has_document("shared:1") and idx.store.has_document("other:2")
        # a new version left with no passages (only boilerplate) removes the old one
        (tmp_path / "b.md").write_text("---\nid: shared:1\nsource_type: guideline\n---\n## Disclaimer\n\nNo advice.\n")
        rep = ingest(idx, [tmp_path / "b.md"], progress=False)
        assert not idx.store.has_document("shared:1")
    finally:
        idx.close()
