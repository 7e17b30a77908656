"""Quality math of the knowledge graph as pure functions (guideline-KG paper formulas)."""

import math

import pytest

from medr2.kg import quality as Q


def test_schema_conf_weights_are_the_papers():
    assert Q.schema_conf(1, 1, 1, 1) == pytest.approx(1.0)
    assert Q.schema_conf(1, 0, 0, 0) == pytest.approx(0.30)
    assert Q.schema_conf(0, 1, 0, 0) == pytest.approx(0.25)
    assert Q.schema_conf(0, 0, 1, 0) == pytest.approx(0.35)
    assert Q.schema_conf(0, 0, 0, 1) == pytest.approx(0.10)
    assert Q.entity_score(1.0, 0.5) == 0.75


@pytest.mark.parametrize("h,t,constrained,expected", [
    (True, True, True, 1.0), (True, None, True, 0.5), (None, None, True, 0.5), (False, True, True, 0.0),
    (True, False, True, 0.0), (False, False, False, 1.0),
])
def test_type_score(h, t, constrained, expected):
    assert Q.type_score(h, t, constrained) == expected


def test_direction_score():
    assert Q.direction_score(True, False, True) == 1.0  # symmetric relations have no direction
    assert Q.direction_score(False, False, True) == 0.0  # only the swapped orientation fits
    assert Q.direction_score(False, True, False, reverse_support=3, support=1) == 0.5
    assert Q.direction_score(False, True, False) == 1.0
    assert Q.direction_score(False, None, None, reverse_support=1) == 0.5


def test_support_and_agreement():
    assert Q.support_score(0) == 0.0
    assert Q.support_score(1, 5) == pytest.approx(math.log(2) / math.log(6))
    assert Q.support_score(5, 5) == 1.0 and Q.support_score(50, 5) == 1.0
    assert Q.agreement_score(1, 2) == 0.5 and Q.agreement_score(0, 0) == 0.0


def test_evid_score_redistributes_missing_and_constant_weights():
    # all three: 0.30 / 0.20 / 0.50
    assert Q.evid_score({"agreement": 1.0, "support": 0.0, "human": 0.0}) == pytest.approx(0.30)
    # no human verification: 0.60 / 0.40
    assert Q.evid_score({"agreement": 1.0, "support": 0.0, "human": None}) == pytest.approx(0.60)
    assert Q.evid_score({"agreement": 0.0, "support": 1.0, "human": None}) == pytest.approx(0.40)
    # one extractor: agreement is constant, support carries the score (and human when reviewed)
    assert Q.evid_score({"agreement": 1.0, "support": 0.3, "human": None}, constant={"agreement"}) == pytest.approx(0.3)
    assert Q.evid_score({"agreement": 1.0, "support": 0.3, "human": 1.0}, constant={"agreement"}) == \
        pytest.approx((0.2 * 0.3 + 0.5) / 0.7)
    # nothing informative: the plain mean of what is there
    assert Q.evid_score({"agreement": 0.5, "support": None, "human": None}, constant={"agreement"}) == 0.5


def test_confirmation_raises_evid_score():
    before = Q.evid_score({"agreement": 0.5, "support": 0.39, "human": None})
    after = Q.evid_score({"agreement": 0.5, "support": 0.39, "human": 1.0})
    assert after > before


def test_fuse_and_tiers():
    assert Q.fuse(1.0, 0.0, 0.5) == 0.5
    assert Q.fuse(1.0, 0.0, 0.8) == pytest.approx(0.8)
    assert Q.tier(0.85) == "core" and Q.tier(0.8499) == "extended"
    assert Q.tier(0.70) == "extended" and Q.tier(0.6999) == "exploratory"
    assert Q.tier(0.5, core_min=0.4, extended_min=0.2) == "core"


def test_roc_auc():
    assert Q.roc_auc([0.9, 0.8, 0.2, 0.1], [1, 1, 0, 0]) == 1.0
    assert Q.roc_auc([0.1, 0.2, 0.8, 0.9], [1, 1, 0, 0]) == 0.0
    assert Q.roc_auc([0.5, 0.5, 0.5, 0.5], [1, 0, 1, 0]) == 0.5  # ties count one half
    assert Q.roc_auc([0.9, 0.4, 0.6, 0.1], [1, 1, 0, 0]) == 0.75
    with pytest.raises(ValueError):
        Q.roc_auc([0.1, 0.2], [1, 1])
