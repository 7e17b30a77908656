"""Warnings of an ingestion run (issue 38, section 4): what was left out without failing is
named in the report and printed by ``medr2 ingest``, never skipped silently."""

import json
import os

from test_bad_input import _fake_index

from medr2.cli.ingest import _print_report
from medr2.ingest.loaders.base import Problem
from medr2.ingest.pipeline import IngestReport, ingest


def _medquad(path, answers):
    """A MedQuAD JSONL file with one record per entry of ``answers`` ("" or None: no answer)."""
    with path.open("w") as fh:
        for i, answer in enumerate(answers):
            rec = {"qid": f"q{i}", "qtype": "information", "question": f"What is condition {i}?",
                   "focus": f"Condition {i}"}
            if answer is not None:
                rec["answer"] = answer
            fh.write(json.dumps(rec) + "\n")
    return path


def test_symlink_loops_are_reported_and_the_rest_ingested(tmp_path):
    root = tmp_path / "in"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "note.md").write_text("# Gout\n\nAllopurinol lowers urate.\n")
    os.symlink(root, root / "sub" / "up")  # the folder inside itself
    os.symlink(root / "b", root / "a")  # a -> b -> a
    os.symlink(root / "a", root / "b")
    idx = _fake_index(tmp_path / "i")
    try:
        rep = ingest(idx, [root], progress=False)
    finally:
        idx.close()
    loops = {(w.path, w.reason) for w in rep.warnings}
    assert loops == {(str(root / n), "symlink loop") for n in ("a", "b", "sub/up")}
    assert rep.files_ingested == 1 and rep.documents_added == 1 and rep.status == "ok"
    assert {"path": str(root / "sub" / "up"), "reason": "symlink loop"} in rep.to_dict()["warnings"]


def test_a_records_file_without_any_answer_is_a_warning(tmp_path):
    empty = _medquad(tmp_path / "medquad.jsonl", [""] * 6 + [None] * 6)
    some = _medquad(tmp_path / "some.jsonl", ["", "Gout is an inflammatory arthritis.", None])
    idx = _fake_index(tmp_path / "i")
    try:
        rep = ingest(idx, [empty, some], progress=False)
    finally:
        idx.close()
    assert rep.documents_added == 1  # the answered record of some.jsonl
    (warning,) = rep.warnings  # a file with an answer left is not warned about
    assert warning.path == str(empty)
    assert "0 of 12 MedQuAD records" in warning.reason and '"answer"' in warning.reason
    assert f"nothing was ingested from {empty}" in warning.reason
    assert rep.to_dict()["warnings"] == [{"path": str(empty), "reason": warning.reason}]


def test_the_cli_prints_warnings(capsys):
    rep = IngestReport(files_seen=1, files_ingested=1, warnings=[Problem("/data/in/up", "symlink loop")])
    _print_report(rep)
    out, err = capsys.readouterr()
    assert "WARNING /data/in/up: symlink loop" in err
    assert out.startswith("ok: 1 file(s) ingested") and "1 warning(s)" in out
