"""docs/api.md is a walk-through whose every code block runs: this runs it."""

import doctest
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def test_api_walkthrough_runs_as_written():
    res = doctest.testfile(str(DOC), module_relative=False, optionflags=doctest.ELLIPSIS)
    assert res.attempted > 20 and res.failed == 0
