"""medr2's reranker: training on a tiny set, the model directory it writes, loading, scoring,
calibration math, the shipped default, and the training data's held-out rules."""

import json

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import shared

from medr2.search.cross_encoder import (CARD, SHARED_KEYS, SHIPPED, WEIGHTS, CrossEncoderError, is_model_dir,
                                        load_cross_encoder)
from medr2.search.rerank_data import RerankDataError, pairs_file
from medr2.search.train_reranker import (TrainOptions, choose_prior, fit_calibration, one_se_choice, pool_metrics,
                                         rechoose, run, train, with_prior)

TOPICS = [
    ("asthma", "inhaled corticosteroids", "airway inflammation and wheeze"),
    ("gout", "allopurinol", "uric acid crystals in joints"),
    ("hypothyroidism", "levothyroxine", "low thyroid hormone output"),
    ("tuberculosis", "isoniazid with rifampicin", "infection by Mycobacterium tuberculosis"),
    ("migraine", "triptans", "recurrent throbbing headache"),
    ("scabies", "permethrin cream", "an itchy mite infestation of the skin"),
    ("anaphylaxis", "intramuscular adrenaline", "a severe allergic reaction"),
    ("malaria", "artemisinin combination therapy", "Plasmodium parasites in red cells"),
    ("heart failure", "ACE inhibitors and beta blockers", "a weak pumping heart"),
    ("psoriasis", "topical vitamin D analogues", "scaly skin plaques"),
    ("epilepsy", "valproate or lamotrigine", "recurrent unprovoked seizures"),
    ("glaucoma", "prostaglandin eye drops", "raised intraocular pressure damaging the optic nerve"),
]


def write_pairs(path):
    with path.open("w") as fh:
        for cond, drug, what in TOPICS:
            fh.write(json.dumps({"query": f"What is the first-line treatment of {cond}?",
                                 "positive": f"{cond.capitalize()} ({what}) is treated first with {drug}; "
                                             f"guidelines recommend {drug} as initial therapy for {cond}."}) + "\n")
    return path


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    root = tmp_path_factory.mktemp("rr")
    opts = TrainOptions(layers=1, max_steps=3, batch_groups=4, negatives=3, dev_fraction=0.3, seed=1)
    with pytest.MonkeyPatch.context() as mp:  # its ONNX export goes to a runtime cache of its own
        mp.setenv("MEDR2_HOME", str(root / "home"))
        card = run(None, [write_pairs(root / "pairs.jsonl")], root / "model", root / "work", opts,
                   log=lambda m: None, progress=False)
        yield root, card


def test_training_on_a_tiny_set_writes_a_loadable_model_with_a_card(tiny_model):
    root, card = tiny_model
    model_dir = root / "model"
    assert is_model_dir(model_dir) and (model_dir / "README.md").is_file()
    assert card["layers"] == 1 and card["steps"] == 3
    assert card["data"]["train_queries"] + card["data"]["dev_queries"] == len(TOPICS)
    assert set(card["dev"]) >= {"hybrid_ndcg10", "rerank_ndcg10", "rerank_mrr"}
    assert card["calibration"]["pairs"] > 0
    # chosen again on the engine it runs on (ONNX int8), the torch-int8 choice kept for the record
    assert card["runtime"] == "onnx-int8" and "rerank_ndcg10" in card["dev_torch_int8"]
    from safetensors import safe_open

    with safe_open(str(model_dir / WEIGHTS), "pt") as f:
        keys = set(f.keys())
        assert not keys & set(SHARED_KEYS)  # the bundled word embeddings are not shipped again
        assert all(f.get_tensor(k).dtype.is_floating_point and f.get_tensor(k).element_size() == 2 for k in keys)
    assert "classifier.weight" in keys and not any(".layer.1." in k for k in keys)
    ce = load_cross_encoder(str(model_dir))
    texts = ["Gout is treated with allopurinol.", "Scabies needs permethrin."]
    rel = ce.relevance("treatment of gout", texts)
    assert rel.shape == (2,) and np.all((rel >= 0) & (rel <= 1))
    # the calibration on the card is what turns logits into the probability (same batch: int8
    # activations are quantised per batch, so a passage's logit may move slightly with its batch)
    lg = ce.logits("treatment of gout", texts)
    a, b, beta = card["calibration"]["a"], card["calibration"]["b"], card["prior"]
    score = lg - beta * np.log([1.0, 2.0])  # the fused rank as a prior: texts come in fused order
    assert rel == pytest.approx(1 / (1 + np.exp(-(a * score + b))), rel=1e-6, abs=1e-12)
    assert card["prior"] in (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 8.0) and "grid_ndcg10" in card["dev"]
    assert card["sibling"] in (0.0, 0.25, 0.5, 0.75) and set(card["dev"]["by_source"]) <= {"pairs"}


def test_training_is_seeded(tiny_model):
    root, _ = tiny_model
    groups = json.loads((root / "work" / "groups.json").read_text())["groups"][:4]
    opts = TrainOptions(layers=1, max_steps=2, batch_groups=2, negatives=3, seed=5)
    m1, _ = train(groups, opts, log=lambda m: None)
    m2, _ = train(groups, opts, log=lambda m: None)
    w1, w2 = m1.classifier.weight.detach().numpy(), m2.classifier.weight.detach().numpy()
    assert np.array_equal(w1, w2) and np.abs(w1).sum() > 0


def test_bad_model_dir_and_bad_pairs_are_clear_errors(tmp_path):
    with pytest.raises(CrossEncoderError, match="train-reranker"):
        load_cross_encoder(str(tmp_path))
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"query": "q", "positive": "p"}\n{"query": "q2"}\n')
    with pytest.raises(RerankDataError, match=r"p\.jsonl:2"):
        pairs_file(bad, {})


def test_cli_needs_data_or_pairs(tmp_path):
    from medr2.cli import main

    r = CliRunner().invoke(main, ["train-reranker", "--out", str(tmp_path / "m")])
    assert r.exit_code == 2 and "--data" in r.output
    r = CliRunner().invoke(main, ["train-reranker", "--out", str(tmp_path / "m"), "--rechoose"])
    assert r.exit_code == 2 and "card.json" in r.output


def test_rechoose_rewrites_the_card_from_the_mined_dev_groups(tiny_model, tmp_path):
    import shutil

    root, card = tiny_model
    model = tmp_path / "model"
    shutil.copytree(root / "model", model)
    with pytest.raises(ValueError, match="groups.json does not exist"):
        rechoose(model, tmp_path / "nowork", log=lambda m: None)
    c = json.loads((model / CARD).read_text())
    c["prior"], c["calibration"]["a"] = 8.0, 9.0
    (model / CARD).write_text(json.dumps(c))
    again = rechoose(model, root / "work", log=lambda m: None)
    assert again["prior"] == card["prior"] and again["calibration"] == card["calibration"]
    assert json.loads((model / CARD).read_text())["prior"] == card["prior"]


def test_one_se_rule_prefers_the_smaller_prior_within_noise():
    rng = np.random.default_rng(1)
    base = rng.random(400)
    noisy = {(0.0, 2.0): base, (0.0, 1.0): np.clip(base - rng.normal(0.002, 0.05, 400), 0, 1),
             (0.5, 1.0): np.clip(base - 0.2, 0, 1)}
    assert one_se_choice(noisy) == (0.0, 1.0)  # 0.002 worse, well within one standard error
    clear = {(0.0, 2.0): base, (0.0, 1.0): np.clip(base - 0.05, 0, 1)}
    assert one_se_choice(clear) == (0.0, 2.0)  # always worse: the better setting stays


def test_the_prior_reads_the_best_rank_of_an_expanded_pool():
    from medr2.schema import Hit
    from medr2.search.rerank import MedR2Reranker

    rr = MedR2Reranker("bundled:medr2-reranker")
    texts = ["Aspirin after myocardial infarction lowers mortality.", "Gout is treated with allopurinol."] * 3
    hits = [Hit(passage_id=str(i), doc_id=str(i), text=t, score=0.0) for i, t in enumerate(texts)]
    raw = rr.model.logits("aspirin after infarction", texts)
    hits[5].scores["best_rank"] = 1  # fused 6th, but first in one phrasing's own list
    out = {h.passage_id: h.scores["rerank"] for h in rr.rerank("aspirin after infarction", hits, 6)}
    assert out["5"] == pytest.approx(raw[5], abs=1e-5)
    assert out["3"] == pytest.approx(raw[3] - rr.model.prior * np.log(4), abs=1e-5)


def test_calibration_recovers_a_known_logistic_and_metrics_rank_the_pool():
    rng = np.random.default_rng(0)
    x = rng.normal(0, 2, 4000)
    y = (rng.random(4000) < 1 / (1 + np.exp(-(1.5 * x - 0.5)))).astype(float)
    cal = fit_calibration(x, y)
    assert cal["a"] == pytest.approx(1.5, abs=0.15) and cal["b"] == pytest.approx(-0.5, abs=0.15)
    g = {"pool": ["a", "b", "c", "d"], "pool_gold": [False, False, False, True], "gold_total": 2}
    m = pool_metrics([g], [[0.0, 0.1, 0.2, 0.9]])
    assert m["rerank_mrr"] == 1.0 and m["hybrid_mrr"] == 0.25
    assert m["rerank_recall10"] == m["hybrid_recall10"] == 0.5  # one gold passage is outside the pool
    assert with_prior([[1.0, 1.0]], 1.0)[0] == pytest.approx([1.0, 1.0 - np.log(2)])
    # the reranker alone puts a distractor first; the fused rank (gold first) fixes it at beta >= 1.5
    g2 = {"pool": ["gold", "x", "y"], "pool_gold": [True, False, False], "gold_total": 1}
    sibling, beta, table = choose_prior([g2], [[1.0, 2.0, 0.0]])
    assert sibling == 0.0 and beta == min(b for (w, b) in table if w == 0.0 and b > 1.0 / np.log(2))
    assert table[(0.0, 0.0)] < table[(0.0, beta)] == 1.0
    # a weak second passage of the gold document rises with its sibling once the pull is on
    g3 = {"pool": ["g1", "x", "g2"], "pool_docs": ["d", "e", "d"], "pool_gold": [True, False, True],
          "gold_total": 2}
    sibling, beta, table = choose_prior([g3], [[3.0, 1.0, -1.0]])
    assert table[(0.0, 0.0)] < 1.0 and sibling > 0.0 and table[(sibling, beta)] == 1.0


def test_shipped_reranker_is_the_default_and_scores_relevance():
    from medr2.config import Config
    from medr2.schema import Hit
    from medr2.search.rerank import MedR2Reranker, load_reranker

    assert is_model_dir(SHIPPED) and (SHIPPED / CARD).is_file()
    rr = load_reranker(Config().rerank)
    assert isinstance(rr, MedR2Reranker) and rr.name == "bundled:medr2-reranker"
    hits = [Hit(passage_id="x", doc_id="d1", title="Mitochondria", text="The mitochondrion makes ATP."),
            Hit(passage_id="y", doc_id="d2", title="Metformin in kidney disease",
                text="Metformin is reduced below eGFR 45 and stopped below eGFR 30 ml/min.")]
    out = rr.rerank("Can metformin be used when eGFR is below 30?", hits, 2)
    assert [h.passage_id for h in out] == ["y", "x"]
    assert all(0 < h.scores["relevance"] < 1 and "rerank" in h.scores for h in out)
    assert out[0].scores["relevance"] > 0.5 > out[1].scores["relevance"]


def test_training_data_holds_out_the_benchmarks_test_questions():
    from medr2.formulate.train import split_of
    from medr2.search.rerank_data import MEDQUAD_HELD_OUT, medquad, pubmedqa

    data = shared("benchmarks/pubmedqa/ori_pqal.json").parents[2]
    test_ids = set(json.loads((data / "benchmarks/pubmedqa/test_ground_truth.json").read_text()))
    got = pubmedqa(data, {})
    assert len(got) == 500 and not {e.group for e in got} & test_ids
    rows = {json.loads(line)["qid"]: json.loads(line) for line in shared("corpora/medquad/medquad.jsonl").open()}
    mq = medquad(data, {}, 300, seed=0)
    assert len(mq) == 300
    assert all(split_of(str(rows[e.doc_id.removeprefix("medquad-")]["doc_id"]), MEDQUAD_HELD_OUT) == "train"
               for e in mq)
