"""Request bodies of the HTTP API, and the answer modes it offers.

Bodies refuse unknown fields (422), strings that are not valid Unicode (a lone surrogate such as
``"\\ud800"``, which JSON lets through; pydantic refuses it, and the 422 leaves the input out, see
:mod:`medr2.serve.guards`), and a search whose ``year_min`` is after its ``year_max``. ``mode``
is one of the API's names in :data:`MODES`, each the name of a method in the registry
``medr2.pipelines.PIPELINES``; :func:`check_modes` holds them to it when the application is built.

Example::

    >>> AskBody(question="Is metformin safe in CKD?").mode
    'medr2'
    >>> MODES["vanilla"]
    'vanilla_rag'
    >>> SearchBody(query="metformin", k=3).model_dump()["source_types"]
    []
    >>> from pydantic import ValidationError
    >>> for bad in ({"query": "\\ud800abc"}, {"query": "x", "year_min": 2020, "year_max": 2010}):
    ...     try:
    ...         SearchBody(**bad)
    ...     except ValidationError as e:
    ...         print(e.errors()[0]["msg"])
    Input should be a valid string, unable to parse raw data as a unicode string
    Value error, year_min (2020) is after year_max (2010): no document can match
"""

from __future__ import annotations

from typing import Literal, Mapping, Optional

from pydantic import BaseModel, ConfigDict, Field, model_validator

MODES: dict[str, str] = {"medr2": "medr2", "kg": "kg", "vanilla": "vanilla_rag", "tcm": "tcm_diffrag"}
"""The API's mode names -> registered pipeline names (``ask`` mode ``vanilla`` runs ``vanilla_rag``)."""

Mode = Literal[tuple(MODES)]  # type: ignore[valid-type]  # the API names, in this order


def check_modes(registry: Mapping[str, object]) -> dict[str, str]:
    """:data:`MODES`, after checking that every pipeline it names is in ``registry``.

    >>> check_modes({"medr2": 1, "kg": 2, "vanilla_rag": 3, "tcm_diffrag": 4})["kg"]
    'kg'
    >>> check_modes({"medr2": 1, "tcm_diffrag": 4})
    Traceback (most recent call last):
    ...
    ValueError: the service's modes name unregistered pipelines: kg (mode kg), vanilla_rag (mode vanilla)
    """
    missing = [f"{pipe} (mode {mode})" for mode, pipe in MODES.items() if pipe not in registry]
    if missing:
        raise ValueError(f"the service's modes name unregistered pipelines: {', '.join(missing)}")
    return MODES


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AskBody(_Body):
    question: str = Field(min_length=1)
    options: dict[str, str] = Field(default_factory=dict)
    mode: Mode = "medr2"


class SearchBody(_Body):
    query: str = Field(min_length=1)
    k: int = Field(10, ge=1)
    source_types: list[str] = Field(default_factory=list)
    year_min: Optional[int] = None
    year_max: Optional[int] = None
    languages: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _years_in_order(self) -> "SearchBody":
        if self.year_min is not None and self.year_max is not None and self.year_min > self.year_max:
            raise ValueError(f"year_min ({self.year_min}) is after year_max ({self.year_max}): no document can match")
        return self


class ReviewBody(_Body):
    action: Literal["confirm", "reject"]
    note: str = Field("", max_length=2000)
