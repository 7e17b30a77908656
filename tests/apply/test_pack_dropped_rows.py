"""Packing the context: rows under the relevance floor (and conflict losers) never reach it."""

from medr2.apply.context import estimate_tokens, pack_rows
from medr2.appraise.order import apply_floor
from medr2.schema import EvidenceRow


def rows():
    out = [EvidenceRow(passage_id=p, doc_id=f"d{p}", title=p, coarse_rank=i, relevance=rel, F=1.0,
                       text="Stop metformin when the eGFR falls below 30 mL/min.")
           for i, (p, rel) in enumerate([("a", 0.9), ("b", 0.01), ("c", None), ("d", 0.6)], 1)]
    apply_floor(out, 0.05)
    out[3].reason = "dropped: conflicts with a (level 3 beats 9); ..."
    return out


def test_rows_under_the_floor_are_never_packed():
    rs = rows()
    items = pack_rows(rs, 4096, estimate_tokens)
    assert [x.passage_id for x in items] == ["a", "c"] and [x.n for x in items] == [1, 2]
    b = rs[1]
    assert not b.kept and b.n is None and b.reason == "dropped: not relevant (relevance 0.01 < floor 0.05)"
    assert rs[3].reason.startswith("dropped: conflicts") and not rs[3].kept


def test_a_window_of_only_irrelevant_rows_stays_empty():
    rs = [r for r in rows() if r.passage_id == "b"]
    # not even the cut-to-fit fallback (the best passage given cut when none fits) packs it
    assert pack_rows(rs, 4096, estimate_tokens) == [] and pack_rows(rs, 8, estimate_tokens) == []
    assert not rs[0].kept and rs[0].reason.startswith("dropped: not relevant")
