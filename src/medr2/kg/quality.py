"""Quality of a triple, as pure functions (guideline-KG paper).

* SchemaConf = 0.30 entity + 0.25 relation + 0.35 type + 0.10 direction, where the entity
  score is the mean of the head's and tail's matching scores, the type score is 1.0 when the
  domain/range constraint is satisfied, 0.5 for an unknown entity type, 0.0 for a known
  violation and 1.0 when no constraint applies.
* EvidScore = 0.30 extractor agreement + 0.20 passage support + 0.50 human verification
  (agreement: the share of the extractors that ran on the triple's documents *and can produce
  its relation* that produced it: an extractor that never emits a relation is not counted as
  disagreeing; on the held-out round 3 of labelled triples this took EvidScore's ROC-AUC from
  0.48 to 0.74 and Q(t)'s from 0.31 to 0.70, bench/README.md "Quality discrimination"); a
  dimension that is unavailable for the triple (no human review) or constant over the whole
  graph (one extractor only) gives its weight to the others in proportion.
* Q(t) = w * SchemaConf + (1 - w) * EvidScore, tiered core / extended / exploratory.

Example::

    >>> from medr2.kg.quality import evid_score, schema_conf, tier
    >>> round(schema_conf(entity=1.0, relation=1.0, type_=0.5, direction=1.0), 3)
    0.825
    >>> round(evid_score({"agreement": 1.0, "support": 0.5, "human": None}), 3)  # 0.6 / 0.4
    0.8
    >>> tier(0.9), tier(0.7), tier(0.69)
    ('core', 'extended', 'exploratory')
"""

from __future__ import annotations

import json
import math
from typing import Iterable, Mapping, Optional

# bumped when a rule below or in medr2.kg.build.QualityModel changes, so that `medr2 kg build` rescores
# every triple of an existing graph (2: agreement over the extractors that can produce the relation;
# a change to an extractor's relations rescores by itself, :func:`quality_stamp`)
RULES_VERSION = 2
SCHEMA_WEIGHTS = {"entity": 0.30, "relation": 0.25, "type": 0.35, "direction": 0.10}
EVID_WEIGHTS = {"agreement": 0.30, "support": 0.20, "human": 0.50}


def quality_stamp(constant: Iterable[str], relations: Mapping[str, Iterable[str]]) -> str:
    """What a graph's quality scores were computed under (the dimensions held constant, the rules'
    version, each extractor's relations); a graph whose stored stamp differs is rescored whole.

    >>> quality_stamp(["agreement"], {"rules": {"treats"}})
    '{"constant": ["agreement"], "rules": 2, "relations": {"rules": ["treats"]}}'
    """
    return json.dumps({"constant": sorted(constant), "rules": RULES_VERSION,
                       "relations": {k: sorted(v) for k, v in sorted(relations.items())}})


def schema_conf(entity: float, relation: float, type_: float, direction: float,
                weights: Mapping[str, float] = SCHEMA_WEIGHTS) -> float:
    w = weights
    total = w["entity"] + w["relation"] + w["type"] + w["direction"]
    return (w["entity"] * entity + w["relation"] * relation + w["type"] * type_ + w["direction"] * direction) / total


def entity_score(head: float, tail: float) -> float:
    return (head + tail) / 2.0


def type_score(head_ok: Optional[bool], tail_ok: Optional[bool], constrained: bool = True) -> float:
    """1.0 satisfied (or no constraint), 0.0 a known violation, 0.5 an unknown type."""
    if not constrained:
        return 1.0
    if head_ok is False or tail_ok is False:
        return 0.0
    if head_ok is None or tail_ok is None:
        return 0.5
    return 1.0


def direction_score(symmetric: bool, given_ok: Optional[bool], swapped_ok: Optional[bool],
                    reverse_support: int = 0, support: int = 1) -> float:
    """1.0 when the orientation fits (or the relation is symmetric), 0.0 when only the swapped
    orientation fits the constraints, 0.5 when the graph asserts the reverse triple more often
    or the types cannot tell."""
    if symmetric:
        return 1.0
    if given_ok is False and swapped_ok is True:
        return 0.0
    if reverse_support > support:
        return 0.5
    if given_ok is None and swapped_ok is None:
        return 0.5 if reverse_support else 1.0
    return 1.0


def support_score(n_passages: int, saturation: int = 5) -> float:
    """Passage support frequency in [0, 1]: log(1 + n) / log(1 + saturation), capped at 1."""
    if n_passages <= 0:
        return 0.0
    return min(1.0, math.log1p(n_passages) / math.log1p(saturation))


def agreement_score(n_agreeing: int, n_applicable: int) -> float:
    """Share of the extractors that ran on the triple's passages and produced it."""
    return n_agreeing / n_applicable if n_applicable else 0.0


def evid_score(values: Mapping[str, Optional[float]], weights: Mapping[str, float] = EVID_WEIGHTS,
               constant: Iterable[str] = ()) -> float:
    """Weighted mean over the available (not None) and non-constant dimensions; their weights
    are renormalised. When every dimension is constant or missing, the plain mean of the
    available values."""
    skip = set(constant)
    used = {k: v for k, v in values.items() if v is not None and k not in skip and weights.get(k, 0) > 0}
    if not used:
        avail = [v for v in values.values() if v is not None]
        return sum(avail) / len(avail) if avail else 0.0
    total = sum(weights[k] for k in used)
    return sum(weights[k] * v for k, v in used.items()) / total


def fuse(schema: float, evid: float, schema_weight: float = 0.5) -> float:
    return schema_weight * schema + (1.0 - schema_weight) * evid


def tier(q: float, core_min: float = 0.85, extended_min: float = 0.70) -> str:
    if q >= core_min:
        return "core"
    if q >= extended_min:
        return "extended"
    return "exploratory"


def roc_auc(scores: list[float], labels: list[int]) -> float:
    """Area under the ROC curve (ties count one half); labels 1 = correct triple."""
    pos = [s for s, y in zip(scores, labels) if y]
    neg = [s for s, y in zip(scores, labels) if not y]
    if not pos or not neg:
        raise ValueError("ROC-AUC needs both correct and incorrect labels")
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        r = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[order[k]] = r
        i = j + 1
    rank_pos = sum(r for r, y in zip(ranks, labels) if y)
    return (rank_pos - len(pos) * (len(pos) + 1) / 2.0) / (len(pos) * len(neg))
