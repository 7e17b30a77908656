from medr2.schema import Document, DocumentMeta, Passage, Section, SourceType, text_id


def test_text_id_is_stable_and_content_sensitive():
    a = text_id("pmid:1", ["Results"], "Metformin lowered HbA1c.")
    assert a == text_id("pmid:1", ["Results"], "Metformin lowered HbA1c.")
    # whitespace and Unicode compatibility forms do not change the id
    assert a == text_id("pmid:1", ["Results"], "Metformin  lowered\nHbA1c.")
    assert a == text_id("pmid:1", ["Results"], "Ｍetformin lowered HbA1c.")
    assert a != text_id("pmid:1", ["Results"], "Metformin raised HbA1c.")
    assert a != text_id("pmid:2", ["Results"], "Metformin lowered HbA1c.")
    assert a != text_id("pmid:1", ["Methods"], "Metformin lowered HbA1c.")
    assert a != text_id("pmid:1", ["Results"], "Metformin lowered HbA1c.", occurrence=1)
    assert a.startswith("p") and len(a) == 21


def test_document_round_trip_and_walk():
    doc = Document(
        doc_id="ngc:1", title="G", source_type=SourceType.guideline,
        sections=[Section(title="Recs", children=[Section(title="Major", text="Do X.")])],
        meta=DocumentMeta(year=2010, mesh_terms=["Diabetes Mellitus"]),
    )
    again = Document.from_dict(doc.to_dict())
    assert again == doc
    assert [p for p, _ in doc.walk()] == [("Recs",), ("Recs", "Major")]
    assert doc.full_text() == "Do X."
    assert doc.content_hash() == again.content_hash()
    assert doc.sections[0].outline() == {"title": "Recs", "children": [{"title": "Major", "children": []}]}


def test_passage_embedding_text_prefixes_heading_path_once():
    p = Passage(passage_id="p1", doc_id="d", text="Body.", heading_path=["Guide", "Therapy"])
    assert p.embedding_text("Guide") == "Guide > Therapy\nBody."
    assert Passage.from_dict(p.to_dict()) == p
