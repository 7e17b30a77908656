"""Pipeline settings and user options are validated."""

import pytest


def test_pipeline_settings_are_validated():
    from pydantic import ValidationError

    from medr2.config import Config
    from medr2.pipelines import validate_options
    from medr2.search.hybrid import QueryError

    for bad in ({"appraise": {"unknown_level": 0}}, {"appraise": {"levels": {"guideline": 12}}},
                {"appraise": {"doc_type_temperature": 0}}, {"assess": {"max_rounds": 0}},
                {"apply": {"cot": False}}):
        with pytest.raises(ValidationError):
            Config.model_validate(bad)
    assert validate_options({"a": " x ", "B": "y"}) == {"A": "x", "B": "y"}
    for bad in ({"A": "x"}, {"AB": "x", "C": "y"}, {"A": "", "B": "y"}, {"a": "x", "A": "y"}):
        with pytest.raises(QueryError):
            validate_options(bad)

