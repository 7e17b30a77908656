import pytest

from medr2.util.shipped import model_file


def test_a_named_file_is_used_and_a_missing_one_says_how_to_rebuild(tmp_path):
    f = tmp_path / "m.npz"
    f.write_bytes(b"x")
    with model_file(f, ("doc_type", "doc_type.npz"), "document-type model", "rebuild it") as p:
        assert p == f
    with pytest.raises(FileNotFoundError, match=r"document-type model .*nope\.npz does not exist; rebuild it"):
        with model_file(tmp_path / "nope.npz", ("doc_type", "doc_type.npz"), "document-type model", "rebuild it"):
            pass
    with pytest.raises(FileNotFoundError, match=r"shipped study-design model \(medr2/models/design/none\.npz\) .*"
                                                r"rebuild it, or set x"):
        with model_file("", ("design", "none.npz"), "study-design model", "rebuild it", "set x"):
            pass
