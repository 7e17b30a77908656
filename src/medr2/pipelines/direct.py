"""Direct answering: the generator alone, no retrieval (``direct``; ``direct_cot`` reasons step by
step first, MIRAGE's CoT setting).

Example::

    >>> from medr2.pipelines import PIPELINES
    >>> PIPELINES["direct_cot"].method.__name__, PIPELINES["direct_cot"].cot
    ('Direct', True)
"""

from __future__ import annotations

from medr2.apply.answer import direct_answer, failed_answer
from medr2.llm.base import LLMError, stage
from medr2.pipelines.base import Method
from medr2.schema import AskResult


class Direct(Method):
    def answer(self, question: str, options: dict[str, str], res: AskResult) -> None:
        e = self.engine
        if e.generator is None:
            raise LLMError(f"the {self.name} pipeline answers with the generator alone; none is configured "
                           "(give one with --llm)")
        with stage("generate"):
            try:
                ans = (self.loglik().answer(question, options, []) if self.use_loglik(options) else
                       direct_answer(e.generator, question, options, self.s.cot, e.config.apply.max_answer_tokens))
            except LLMError as err:  # as in the retrieving methods: one failed answer, not a failed run
                ans = failed_answer(err)
        self.finish(res, ans)
