"""Configuration: keys live with the stage that reads them; keys that moved are still read from
old config files and from old indexes' stored configs, with a deprecation warning (a FutureWarning: shown to users by default)."""

import json
import warnings

import pytest

from medr2.config import MOVED_KEYS, Config, ConfigError


def test_moved_keys_are_read_at_their_new_place_with_a_warning(tmp_path):
    p = tmp_path / "old.toml"
    p.write_text("[appraise]\ncontext_tokens = 1024\nalpha = 0.5\n"
                 "[formulate]\nexpected_doc_types = { factual = ['definition'] }\n")
    with pytest.warns(FutureWarning, match=r"\[appraise\] context_tokens is now \[apply\] context_tokens"):
        cfg = Config.load(p)
    assert cfg.apply.context_tokens == 1024 and cfg.appraise.alpha == 0.5
    assert cfg.appraise.expected_doc_types == {"factual": ["definition"]}
    assert not hasattr(cfg.appraise, "context_tokens") and not hasattr(cfg.formulate, "expected_doc_types")


def test_a_key_given_at_both_places_keeps_the_new_one():
    with pytest.warns(FutureWarning):
        cfg = Config.model_validate({"appraise": {"context_tokens": 1024}, "apply": {"context_tokens": 2048}})
    assert cfg.apply.context_tokens == 2048


def test_an_old_indexs_stored_config_still_opens():
    """An index stores its config as JSON (store meta 'config'); one written before the move."""
    old = json.loads(Config().model_dump_json())
    old["appraise"]["context_tokens"] = old["apply"].pop("context_tokens")
    old["formulate"]["expected_doc_types"] = old["appraise"].pop("expected_doc_types")
    del old["amt"], old["apply"]["prompt_overhead_tokens"]  # settings added since
    with pytest.warns(FutureWarning):
        cfg = Config.model_validate_json(json.dumps(old))
    assert cfg == Config()


def test_current_configs_raise_no_warning_and_round_trip():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = Config.model_validate_json(Config().model_dump_json())
    assert cfg == Config()
    assert all(new[0] in Config.model_fields for new in MOVED_KEYS.values())


def test_unknown_keys_are_still_errors(tmp_path):
    p = tmp_path / "typo.toml"
    p.write_text("[apply]\ncontext_token = 1024\n")
    with pytest.raises(ConfigError, match="context_token"):
        Config.load(p)


def test_every_section_has_its_constants_named():
    cfg = Config()
    assert cfg.apply.prompt_overhead_tokens == 900 and cfg.amt.max_expansions == 3
    assert cfg.amt.fallback_passages == 3 and cfg.kg.dense_passages == 5
