"""Large passage batches embedded in bf16 on torch (dense.passage_precision, issue 39): the same
encoder to a cosine of 0.9999, queries and small batches untouched, "auto" only on AMX-BF16 CPUs."""

import numpy as np

from medr2.config import DenseConfig
from medr2.index.dense import Bf16Passages, load_encoder, passage_bf16

TEXTS = [f"Passage {i}: metformin is stopped when the eGFR falls below 30 and reduced below 45; "
         f"SGLT2 inhibitors slow kidney disease ({i % 5} trials)." for i in range(12)] + \
        ["gout", "Inhaled corticosteroids reduce airway inflammation in persistent asthma. " * 30]


def test_large_batches_run_in_bf16_and_give_the_fp32_vectors():
    fp32 = load_encoder(DenseConfig(runtime="torch", passage_precision="fp32"))
    enc = load_encoder(DenseConfig(runtime="torch", passage_precision="bf16", bf16_min_passages=8))
    assert isinstance(enc, Bf16Passages) and enc.name == fp32.name and enc.dim == fp32.dim
    want = fp32.encode_passages(TEXTS)
    got = enc.encode_passages(TEXTS)
    assert enc.bf16_batches == 1 and got.dtype == np.float32 and got.shape == want.shape
    cos = (got * want).sum(1)
    assert cos.min() > 0.9999 and not np.array_equal(got, want)  # bf16 arithmetic, same vectors
    # a batch under the threshold and a query go to the fp32 encoder unchanged
    np.testing.assert_array_equal(enc.encode_passages(TEXTS[:3]), fp32.encode_passages(TEXTS[:3]))
    np.testing.assert_array_equal(enc.encode_query("metformin"), fp32.encode_query("metformin"))
    assert enc.bf16_batches == 1


def test_auto_needs_the_bundled_minilm_on_an_amx_cpu():
    amx = frozenset({"avx512f", "amx_bf16"})
    assert passage_bf16(DenseConfig(), amx)
    assert not passage_bf16(DenseConfig(), frozenset({"avx512f", "avx512_bf16"}))  # no AMX: fp32 is as fast
    assert not passage_bf16(DenseConfig(model="intfloat/e5-small-v2"), amx)  # not validated: asked for only
    assert passage_bf16(DenseConfig(model="intfloat/e5-small-v2", passage_precision="bf16"), frozenset())
    assert not passage_bf16(DenseConfig(passage_precision="fp32"), amx)
    assert not passage_bf16(DenseConfig(model="bundled:all-MiniLM-L6-v2-int8"), amx)
    assert not passage_bf16(DenseConfig(device="cuda"), amx)
