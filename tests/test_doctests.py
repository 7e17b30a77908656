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


def skipped_only(module) -> bool:
    """Whether every example the module's docstrings hold is marked +SKIP (then it shows nothing
    that is checked: an example that never runs cannot drift, nor be trusted)."""
    examples = [ex for t in doctest.DocTestFinder().find(module, module.__name__) for ex in t.examples]
    return bool(examples) and all(ex.options.get(doctest.SKIP) for ex in examples)


def test_skipped_only_is_caught():
    import types

    m = types.ModuleType("m", ">>> 1 + 1  # doctest: +SKIP\n2\n")
    assert skipped_only(m)
    m.__doc__ += ">>> 2 + 2\n4\n"
    assert not skipped_only(m)
    assert not skipped_only(types.ModuleType("empty", "no examples"))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    module = importlib.import_module(name)
    assert not skipped_only(module), f"every docstring example of {name} is skipped: give it one that runs"
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} docstring examples of {name} failed (output above)"
