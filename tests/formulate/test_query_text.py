"""Query text cleaning and language families."""




def test_query_text_and_language_families():
    from medr2.formulate.formulator import query_text
    from medr2.formulate.language import language_family

    assert query_text("metformin", "Per [2] and [?], stop\x00 it\ufffd.", max_chars=30) == "metformin Per and , stop it ."[:30]
    assert len(query_text("x" * 5000, max_chars=4000)) == 4000
    assert [language_family(v) for v in ("eng", "English", "en-GB", "zh-Hans", "chi", None)] == \
        ["en", "en", "en", "zh", "zh", "en"]

