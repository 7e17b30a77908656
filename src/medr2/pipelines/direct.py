"""Direct answering: the generator alone, no retrieval (``direct``; ``direct_cot`` reasons step by
step first, MIRAGE's CoT setting).

Example::

    >>> from medr2.pipelines import PIPELINES
    >>> PIPELINES["direct_cot"].method.__name__, PIPELINES["direct_cot"].cot
    ('Direct', True)
"""

from __future__ import annotations

from medr2.llm.base import LLMError
from medr2.pipelines.base import Method
from medr2.schema import AskResult


class Direct(Method):
    def answer(self, question: str, options: dict[str, str], res: AskResult) -> None:
        if self.engine.generator is None:
            raise LLMError(f"the {self.name} pipeline answers with the generator alone; none is configured "
                           "(give one with --llm)")
        self.finish(res, self.own_answer(question, options))
