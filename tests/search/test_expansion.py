"""A reformulation expands retrieval: the pools of the question and of its reformulation are
fused by reciprocal rank, so nothing the question alone finds is lost from the pool."""

from medr2.search.fusion import rrf_score
from medr2.search.hybrid import HybridSearcher


def test_pool_many_fuses_pools_by_reciprocal_rank(mixed_index):
    idx, _, _ = mixed_index
    s = HybridSearcher(idx)
    q1, q2 = "allopurinol gout flares", "statin therapy after ischaemic stroke"
    one = s.pool(q1, 5)
    assert [h.passage_id for h in s.pool_many([q1], 5)] == [h.passage_id for h in one]
    p1, p2 = [h.passage_id for h in one], [h.passage_id for h in s.pool(q2, 5)]
    both = s.pool_many([q1, q2], 5)
    ids = [h.passage_id for h in both]
    assert len(ids) == len(set(ids)) and set(ids) <= set(p1) | set(p2)
    assert set(p1) | set(p2) <= set(ids) or len(ids) == max(5, s.config.rerank.top_n)  # nothing found is lost

    def expected(pid):
        return rrf_score([p.index(pid) + 1 if pid in p else None for p in (p1, p2)], s.config.fusion.rrf_k)

    assert all(abs(h.scores["expanded"] - round(expected(h.passage_id), 6)) < 1e-9 for h in both)
    assert [h.scores["expanded"] for h in both] == sorted((h.scores["expanded"] for h in both), reverse=True)
