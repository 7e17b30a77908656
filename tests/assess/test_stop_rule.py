"""The stop rule's pieces as pure functions."""

import math

import numpy as np
import pytest

from medr2.assess.stop_rule import answer_agreement, mean_shift, should_stop, token_f1


def test_stop_rule_pieces():
    assert answer_agreement("b", ["B", "B", "C"], multiple_choice=True) == pytest.approx(2 / 3)
    assert answer_agreement("x", [], multiple_choice=True) == 0.0
    assert token_f1("metformin is first line", "metformin first line") == pytest.approx(0.857, abs=1e-3)
    assert token_f1("a", "b") == 0.0
    a = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert mean_shift(a, a) == 0.0
    assert mean_shift(a, np.array([[1.0, 1.0]])) == pytest.approx(math.sqrt(0.5))
    assert mean_shift(a, np.zeros((0, 2))) == float("inf")
    assert mean_shift(np.zeros((0, 2)), np.zeros((0, 2))) == 0.0
    assert should_stop(1.0, 0.1, 6.85) and not should_stop(0.5, 0.1, 6.85)
    assert should_stop(1.0, 0.0, 6.85) and not should_stop(0.0, 0.0, 6.85)
    assert not should_stop(1.0, float("inf"), 6.85)

