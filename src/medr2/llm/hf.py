"""transformers backend on a local model: a directory, or ``DIR/FILE.gguf`` (needs the
``transformers`` extra: gguf + accelerate, which de-quantise the file into torch).

No grammar-constrained decoding here: the schema is stated in the prompt and the answer is
validated (with bounded repair) by :func:`medr2.llm.base.structured`.

Example: a hub id is refused, not downloaded (medr2 runs offline)::

    >>> from medr2.llm.base import LLMError
    >>> from medr2.llm.hf import TransformersLLM
    >>> try:
    ...     TransformersLLM("Qwen/Qwen2.5-1.5B-Instruct")
    ... except LLMError as e:
    ...     print(e)
    transformers model Qwen/Qwen2.5-1.5B-Instruct is not a local directory (hub downloads are not used)

With a local model directory::

    >>> from medr2.llm.hf import TransformersLLM                              # doctest: +SKIP
    >>> lm = TransformersLLM("/models/Qwen2.5-1.5B-Instruct")                   # doctest: +SKIP
    >>> lm.continuation_logprobs("2 + 2 =", " 4")                               # doctest: +SKIP
    [-0.3...]
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

from medr2.llm.base import LLMError, Usage, json_only_instruction, record
from medr2.llm.cache import LLMCache, cached


class TransformersLLM:
    def __init__(self, model: str, seed: int = 0, n_threads: int = 0, cache: Optional[LLMCache] = None):
        try:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer
        except ImportError:
            raise LLMError("the transformers backend needs torch and transformers (pip install 'medr2[transformers]')") from None
        p = Path(model)
        kwargs: dict[str, Any] = {}
        if p.suffix == ".gguf":
            if not p.is_file():
                raise LLMError(f"GGUF file {model} does not exist")
            kwargs["gguf_file"] = p.name
            p = p.parent
        elif not p.is_dir():
            raise LLMError(f"transformers model {model} is not a local directory (hub downloads are not used)")
        if n_threads:
            torch.set_num_threads(n_threads)
        try:
            self.tok = AutoTokenizer.from_pretrained(str(p), **kwargs)
            self.model = AutoModelForCausalLM.from_pretrained(str(p), **kwargs)
        except Exception as e:
            raise LLMError(f"transformers cannot load {model} ({type(e).__name__}: {str(e)[:300]})") from None
        self.model.eval()
        self.torch = torch
        self.seed = seed
        self.temperature = 0.0
        self.cache = cache
        self.usage = Usage()
        self.name = f"transformers:{model}"

    def count_tokens(self, text: str) -> int:
        return len(self.tok(text, add_special_tokens=False)["input_ids"])

    def _template(self, messages: list[dict[str, str]]) -> str:
        if getattr(self.tok, "chat_template", None):
            return self.tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        return "\n\n".join(f"{m['role']}: {m['content']}" for m in messages) + "\n\nassistant:"

    @cached("chat")
    def chat(self, messages: list[dict[str, str]], max_tokens: int = 512, temperature: float = 0.0,
             seed: int = 0, json_schema: Optional[dict[str, Any]] = None) -> dict[str, Any]:
        t = time.perf_counter()
        if json_schema is not None:
            messages = [*messages, {"role": "user", "content": json_only_instruction(json_schema)}]
        ids = self.tok(self._template(messages), return_tensors="pt", add_special_tokens=False)
        self.torch.manual_seed(seed)
        gen: dict[str, Any] = {"max_new_tokens": max_tokens, "do_sample": temperature > 0}
        if temperature > 0:
            gen["temperature"] = temperature
        with self.torch.no_grad():
            out = self.model.generate(**ids, **gen, pad_token_id=self.tok.pad_token_id or self.tok.eos_token_id)
        new = out[0, ids["input_ids"].shape[1]:]
        text = self.tok.decode(new, skip_special_tokens=True)
        res = {"text": text, "prompt_tokens": int(ids["input_ids"].shape[1]), "completion_tokens": int(len(new)),
               "finish_reason": "length" if len(new) >= max_tokens else "stop"}
        record(self.usage, res["prompt_tokens"], res["completion_tokens"], time.perf_counter() - t)
        return res

    @cached("continuation_logprobs")
    def continuation_logprobs(self, prompt: str, continuation: str) -> list[float]:
        t = time.perf_counter()
        head = self.tok(prompt, add_special_tokens=True)["input_ids"]
        tail = self.tok(continuation, add_special_tokens=False)["input_ids"]
        if not tail:
            raise LLMError("the continuation is empty")
        ids = self.torch.tensor([head + tail])
        with self.torch.no_grad():
            logits = self.model(ids).logits[0, len(head) - 1: -1].float()
        lp = self.torch.log_softmax(logits, dim=-1)[self.torch.arange(len(tail)), self.torch.tensor(tail)]
        record(self.usage, len(head) + len(tail), 0, time.perf_counter() - t)
        return [float(x) for x in lp]
