"""The runnable examples in the package's docstrings run and give what they show.

Each module's docstring example is its documentation (``python -m doctest`` style); an example
that drifted from the code is a bug in the documentation, caught here.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import medr2

MODULES = sorted(m.name for m in pkgutil.walk_packages(medr2.__path__, "medr2."))


def test_modules_found():
    assert len(MODULES) > 50 and "medr2.eval.scoring" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed (output above)"
