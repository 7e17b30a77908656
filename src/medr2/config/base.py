"""The base of every config section: unknown keys are errors, so a typo in a config file is
reported instead of silently ignored.

    >>> from medr2.config.base import Section
    >>> class Demo(Section):
    ...     k: int = 3
    >>> Demo(k=4).k
    4
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")
