"""docs/api.md is a walk-through whose every code block runs: this runs it."""

import doctest
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def test_api_walkthrough_runs_as_written():
    res = doctest.testfile(str(DOC), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 20 and res.failed == 0


def test_over_an_engine_held_elsewhere_searches_and_leaves_it_open(tmp_path):
    """The HTTP service holds its engine (reopened after writes) and calls the API over it."""
    import pytest

    from medr2.api import Medr2
    from medr2.pipelines import Engine

    (tmp_path / "gout.md").write_text("# Gout\n\nAllopurinol lowers urate and prevents gout flares.\n")
    with Medr2.open(tmp_path / "index", create=True, generator="none", scorer="none") as kb:
        kb.ingest([tmp_path / "gout.md"])
    e = Engine.open(tmp_path / "index", generator="none", scorer="none")
    try:
        kb = Medr2.over(e)
        assert kb.search("what prevents gout flares", k=1).hits[0].title == "Gout"
        assert kb.ask("What prevents gout flares?").citations
        with pytest.raises(RuntimeError, match="held elsewhere"):
            kb.ingest([tmp_path / "gout.md"])
        kb.close()
        assert e.searcher.search("gout", k=1).hits  # still open
    finally:
        e.close()
