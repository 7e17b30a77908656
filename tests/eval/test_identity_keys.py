"""A setting added to medr2.config after 2026-12-06 must be declared in
``medr2.eval.identity.ADDED_KEYS`` with the value that reproduces what runs recorded before it
did; otherwise a committed run would resume under a new default that changes its answers (its
manifest lacks the key, and a key only one side records is not compared)."""

from pathlib import Path

from medr2.config import Config
from medr2.eval.identity import _RUNTIME_ONLY, ADDED_KEYS, moved_keys_read

SNAPSHOT = Path(__file__).parent / "data" / "config_keys_2026-12-06.txt"


def dotted_keys(d: dict, prefix: tuple[str, ...] = ()) -> set[tuple[str, ...]]:
    out: set[tuple[str, ...]] = set()
    for k, v in d.items():
        out |= dotted_keys(v, prefix + (k,)) if isinstance(v, dict) and v else {prefix + (k,)}
    return out


def snapshot() -> set[tuple[str, ...]]:
    lines = SNAPSHOT.read_text(encoding="utf-8").splitlines()
    return {tuple(x.split(".")) for x in lines if x and not x.startswith("#")}


def runtime_only(key: tuple[str, ...]) -> bool:
    keys = _RUNTIME_ONLY.get(key[0], set())
    return keys is None or (len(key) == 2 and key[1] in keys)


def test_every_setting_added_since_the_snapshot_is_declared():
    new = {k for k in dotted_keys(Config().model_dump()) - snapshot() if not runtime_only(k)}
    undeclared = sorted(".".join(k) for k in new if k not in ADDED_KEYS)
    assert not undeclared, (f"settings added since {SNAPSHOT.name} are not in medr2.eval.identity.ADDED_KEYS: "
                            f"{undeclared}; add each with the value that reproduces runs made before it")


def test_declared_keys_exist_and_read_at_their_old_value():
    current = dotted_keys(Config().model_dump())
    assert set(ADDED_KEYS) <= current, "ADDED_KEYS names a setting Config does not have"
    # a manifest from before a declared key is read with the declared value, so it compares equal to a
    # manifest that records that value and differs from one that records another
    for path, old in ADDED_KEYS.items():
        before: dict = {}
        node = before
        for name in path[:-1]:
            node = node.setdefault(name, {})
        node["_present"] = 1  # the section existed, the key did not
        read = moved_keys_read(before)
        for name in path[:-1]:
            read = read[name]
        assert read[path[-1]] == old


def test_the_guard_reports_a_new_key_and_spares_runtime_ones():
    keys = dotted_keys(Config().model_dump()) | {("rerank", "made_up"), ("ingest", "made_up")}
    new = {k for k in keys - snapshot() if not runtime_only(k)}
    assert new - set(ADDED_KEYS) == {("rerank", "made_up")}


def test_the_unreadable_script_setting_is_compared_only_where_a_language_other_than_english_is_read():
    """Runs recorded before rerank.max_unknown_share scored every script (1.0): a Chinese run resumed
    under the default (0.2) is refused; an English one (questions and index) resumes, since English
    text has no unknown pieces."""
    from medr2.eval.identity import identity_diff, run_identity

    def manifest(questions, index, share=None):
        cfg = {"rerank": {"top_n": 30} | ({"max_unknown_share": share} if share is not None else {})}
        return {"dataset": "x:100", "method": "medr2", "answer_mode": "loglik", "config": cfg,
                "languages": {"questions": questions, "index": index}}

    old_zh, new_zh = manifest(["zh"], ["zh"]), manifest(["zh"], ["zh"], 0.2)
    assert identity_diff(run_identity(new_zh), run_identity(old_zh)) == ["config [rerank]"]
    assert identity_diff(run_identity(manifest(["en"], ["en"], 0.2)), run_identity(manifest(["en"], ["en"]))) == []
    # an English question over an index holding Chinese passages reads the setting too
    assert identity_diff(run_identity(manifest(["en"], ["en", "zh"], 0.2)), run_identity(manifest(["en"], ["en", "zh"])))
    # ... and a run that kept the fused order (no cross-encoder) never read it
    fused_old, fused_new = manifest(["zh"], ["zh"]), manifest(["zh"], ["zh"], 0.2)
    for m in (fused_old, fused_new):
        m["config"]["rerank"]["cross_encoder"] = ""
    assert identity_diff(run_identity(fused_new), run_identity(fused_old)) == []
    no_langs = {k: v for k, v in new_zh.items() if k != "languages"}
    assert identity_diff(run_identity(no_langs), run_identity(old_zh))  # unknown languages: compared
