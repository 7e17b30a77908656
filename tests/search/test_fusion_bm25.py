import math

import numpy as np
import pytest

from medr2.config import SparseConfig
from medr2.index.segments import Segment, write_segment
from medr2.index.sparse import Tokenizer, bm25_idf, bm25_tf, score_segment
from medr2.search.fusion import fuse, minmax, rrf_score, union_candidates


def test_union_keeps_each_retrievers_score_and_rank():
    c = union_candidates([(1, 0.9), (2, 0.5)], [(2, 7.0), (3, 3.0)])
    assert c[1] == {"dense": 0.9, "dense_rank": 1, "sparse": None, "sparse_rank": None}
    assert c[2] == {"dense": 0.5, "dense_rank": 2, "sparse": 7.0, "sparse_rank": 1}
    assert c[3]["sparse_rank"] == 2 and c[3]["dense"] is None


def test_rrf_math():
    assert rrf_score([1, None], 60) == pytest.approx(1 / 61)
    assert rrf_score([2, 1], 60) == pytest.approx(1 / 62 + 1 / 61)
    c = union_candidates([(1, 0.9), (2, 0.5)], [(2, 7.0), (3, 3.0)])
    ranked = fuse(c, "rrf", rrf_k=60)
    assert [i for i, _ in ranked] == [2, 1, 3]
    assert ranked[0][1] == pytest.approx(1 / 62 + 1 / 61)
    assert c[2]["fused"] == pytest.approx(ranked[0][1])
    # ties (1 and 3 both have a single rank 1 vs 2) break on best rank
    assert ranked[1][1] > ranked[2][1]


def test_union_minmax_fusion():
    assert minmax({1: 2.0, 2: 4.0, 3: 3.0}) == {1: 0.0, 2: 1.0, 3: 0.5}
    assert minmax({1: 5.0}) == {1: 1.0}
    c = union_candidates([(1, 0.9), (2, 0.5)], [(2, 7.0), (3, 3.0)])
    ranked = dict(fuse(c, "union", dense_weight=0.5))
    assert ranked[1] == pytest.approx(0.5)  # dense max, no sparse
    assert ranked[2] == pytest.approx(0.5)  # dense min, sparse max
    assert ranked[3] == pytest.approx(0.0)
    with pytest.raises(ValueError):
        fuse(c, "borda")


def test_bm25_formulas():
    assert float(bm25_idf(1, 10)) == pytest.approx(math.log(1 + 9.5 / 1.5))
    assert float(bm25_tf(2, 10, 10, 1.5, 0.75)) == pytest.approx(2 / (2 + 1.5))
    # longer documents score lower for the same tf
    assert bm25_tf(1, 20, 10, 1.5, 0.75) < bm25_tf(1, 5, 10, 1.5, 0.75)


CORPUS = [
    "Metformin is first-line therapy for type 2 diabetes.",
    "Reduce the metformin dose when kidney function declines.",
    "SGLT2 inhibitors slow chronic kidney disease progression in diabetes.",
    "Hypertension is diagnosed with ambulatory blood pressure monitoring.",
    "Amoxicillin treats community-acquired pneumonia in adults.",
    "Diabetes and hypertension often coexist; kidney disease follows.",
]


def _our_scores(segments, live_total, query, tok):
    terms = list(dict.fromkeys(tok.tokens(query, "en")))
    df = np.array([sum(len(s.postings(t, s.live)[0]) for s in segments) for t in terms], dtype=float)
    n = sum(s.n_live for s in segments)
    avg = sum(float(s.dl[s.live].sum()) for s in segments) / n
    idf = bm25_idf(df, n)
    out = {}
    for s in segments:
        sc = score_segment([s.postings(t, s.live) for t in terms], idf, s.dl, avg, 1.5, 0.75, len(s))
        for pos in np.nonzero(s.live)[0]:
            out[int(s.ids[pos])] = sc[pos]
    return out


@pytest.mark.parametrize("query", ["metformin kidney", "diabetes", "hypertension blood pressure", "pneumonia"])
def test_segmented_bm25_equals_bm25s_on_the_whole_live_corpus(tmp_path, query):
    import bm25s

    tok = Tokenizer(SparseConfig())
    tokens = [tok.tokens(t, "en") for t in CORPUS]
    dim = 4
    vec = np.eye(len(CORPUS), dim, dtype=np.float32)
    # three segments, one document deleted from the second
    write_segment(tmp_path / "a", np.array([0, 1]), vec[:2], tokens[:2], hnsw=False)
    write_segment(tmp_path / "b", np.array([2, 3, 4]), vec[2:5], tokens[2:5], hnsw=False)
    write_segment(tmp_path / "c", np.array([5]), vec[5:], tokens[5:], hnsw=False)
    segs = [Segment.load(tmp_path / n) for n in "abc"]
    segs[1].live[:] = [True, False, True]  # doc 3 removed
    ours = _our_scores(segs, 5, query, tok)

    live_ids = [0, 1, 2, 4, 5]
    ref = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    ref.index([tokens[i] for i in live_ids], show_progress=False)
    q = [t for t in dict.fromkeys(tok.tokens(query, "en"))]
    expected = ref.get_scores(q)
    for j, i in enumerate(live_ids):
        assert ours[i] == pytest.approx(float(expected[j]), rel=1e-5, abs=1e-6), (query, i)


def test_tokenizer_english_and_chinese(tmp_path):
    tok = Tokenizer()
    assert tok.tokens("The kidneys of diabetic patients") == ["kidney", "diabet", "patient"]
    zh = tok.tokens("二甲双胍治疗2型糖尿病")
    assert "糖尿病" in zh and "治疗" in zh and "二甲双胍" not in zh
    # a user dictionary (e.g. a drug list) keeps multi-character terms whole
    d = tmp_path / "drugs.txt"
    d.write_text("二甲双胍\n", encoding="utf-8")
    tok2 = Tokenizer(SparseConfig(jieba_user_dicts=[str(d)]))
    assert "二甲双胍" in tok2.tokens("二甲双胍治疗2型糖尿病")


def test_retrieval_metrics():
    from medr2.util.retrieval_metrics import mrr, ndcg_at_k, percentile, recall_at_k

    assert recall_at_k(["a", "b"], {"a", "b"}, 10) == 1.0
    assert recall_at_k(["x", "y", "a"], {"a"}, 2) == 0.0
    assert mrr(["x", "y", "a"], {"a"}) == pytest.approx(1 / 3)
    assert mrr(["x", "y", "a"], {"a"}, k=2) == 0.0
    assert ndcg_at_k(["a", "b"], {"a", "b"}, 10) == pytest.approx(1.0)
    assert ndcg_at_k(["x", "a"], {"a"}, 10) == pytest.approx(1 / math.log2(3))
    assert ndcg_at_k([], set(), 10) == 0.0
    assert percentile([1, 2, 3, 4], 50) == pytest.approx(2.5)
    assert percentile([5], 95) == 5
