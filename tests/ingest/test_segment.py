import pytest

from medr2.config import SegmentConfig
from medr2.ingest.segment import (
    merge_short,
    pack_balanced,
    segment_document,
    sentence_spans,
)
from medr2.schema import Document, Section, SourceType
from medr2.util.text import count_tokens


def _guideline(text, title="Recommendations"):
    return Document(doc_id="g:1", title="G", source_type=SourceType.guideline,
                    sections=[Section(title=title, text=text)])


def _check_offsets(seg):
    full = seg.doc.full_text()
    for p in seg.passages:
        assert full[p.start:p.end] == p.text


def test_count_tokens_words_punctuation_and_cjk():
    assert count_tokens("Metformin, 500 mg.") == 5
    assert count_tokens("糖尿病患者") == 5


def test_sentence_spans_latin_and_chinese():
    text = "Dr. Smith saw him. He was 62 years old! Was it diabetes? Yes."
    sents = [text[a:b] for a, b in sentence_spans(text)]
    assert sents == ["Dr. Smith saw him.", "He was 62 years old!", "Was it diabetes?", "Yes."]
    zh = "二甲双胍是一线药物。肾功能不全时减量！是否停药？"
    assert [zh[a:b] for a, b in sentence_spans(zh)] == ["二甲双胍是一线药物。", "肾功能不全时减量！", "是否停药？"]


def test_merge_short_into_previous_else_next():
    assert merge_short([(0, 10), (11, 100), (101, 105)], 50) == [(0, 105)]
    assert merge_short([(0, 60), (61, 70)], 50) == [(0, 70)]
    assert merge_short([(0, 5)], 50) == [(0, 5)]


def test_pack_balanced_respects_max_and_avoids_tiny_tails():
    sents = [(i * 100, i * 100 + 95) for i in range(6)]  # six 95-char sentences, 595 chars
    chunks = pack_balanced(sents, 500)
    assert all(b - a <= 500 for a, b in chunks)
    assert len(chunks) == 2 and min(b - a for a, b in chunks) > 200


def test_guideline_fragments_merge_under_50_and_split_over_500():
    cfg = SegmentConfig()
    long_par = " ".join(f"Sentence number {i} explains the evidence behind the recommendation." for i in range(20))
    text = "Short heading\n" + long_par + "\n\nOk.\n\n" + "A normal fragment that is long enough to stand alone here."
    seg = segment_document(_guideline(text), cfg)
    _check_offsets(seg)
    lens = [len(p.text) for p in seg.passages]
    assert all(n >= 50 for n in lens), lens
    assert all(n <= 500 for n in lens), lens
    # the short heading line joined the paragraph it introduces
    assert seg.passages[0].text.startswith("Short heading\nSentence number 0")
    # "Ok." (3 chars) was merged into a neighbour, not dropped
    assert any("Ok." in p.text for p in seg.passages)


def test_guideline_nfkc_and_boilerplate_removed():
    doc = Document(doc_id="g:2", title="G", source_type=SourceType.guideline, sections=[
        Section(title="Recommendations", children=[
            Section(title="Major Recommendations", text="Give ｏｘｙｇｅｎ when saturation is below 92 per cent in adults."),
            Section(title="Cost Analysis", text="Not stated"),
        ]),
        Section(title="Disclaimer", children=[Section(title="NGC Disclaimer", text="The NGC does not develop guidelines.")]),
    ])
    seg = segment_document(doc, SegmentConfig())
    texts = " ".join(p.text for p in seg.passages)
    assert "Give oxygen" in texts  # NFKC folded the full-width letters
    assert "NGC does not develop" not in texts and "Not stated" not in texts
    assert [h for h, _ in seg.doc.walk()] == [("Recommendations",), ("Recommendations", "Major Recommendations")]
    _check_offsets(seg)


def test_short_whole_section_joins_a_sibling():
    doc = Document(doc_id="g:3", source_type=SourceType.guideline, sections=[Section(title="Scope", children=[
        Section(title="Disease", text="Asthma"),
        Section(title="Population", text="Adults and adolescents with persistent asthma symptoms despite therapy."),
    ])])
    seg = segment_document(doc, SegmentConfig())
    assert len(seg.passages) == 1
    assert seg.passages[0].text.startswith("Asthma") and seg.passages[0].heading_path == ["Scope"]
    _check_offsets(seg)


def test_window_passages_token_budget_and_overlap():
    text = " ".join(f"Sentence {i} is about renal function and drug dosing." for i in range(40))
    doc = Document(doc_id="b:1", title="Book", source_type=SourceType.book,
                   sections=[Section(title="Chapter", text=text)])
    cfg = SegmentConfig(passage_tokens=50, passage_overlap_tokens=12)
    seg = segment_document(doc, cfg)
    _check_offsets(seg)
    assert len(seg.passages) > 5
    assert all(count_tokens(p.text) <= 50 for p in seg.passages)
    # consecutive passages overlap by one sentence (11 tokens <= 12)
    assert seg.passages[1].start < seg.passages[0].end
    assert all(p.heading_path == ["Chapter"] for p in seg.passages)
    # ids are stable across runs
    assert [p.passage_id for p in seg.passages] == [p.passage_id for p in segment_document(doc, cfg).passages]


def test_window_never_crosses_headings():
    doc = Document(doc_id="b:2", sections=[Section(title="A", text="Alpha text."), Section(title="B", text="Beta text.")])
    seg = segment_document(doc, SegmentConfig())
    assert [(p.heading_path, p.text) for p in seg.passages] == [(["A"], "Alpha text."), (["B"], "Beta text.")]


def _chapters(n_chapters, words_each):
    return [Section(title=f"Chapter {i}", text=" ".join(["word"] * words_each)) for i in range(n_chapters)]


def test_medr2_units_split_at_chapters_under_cap():
    doc = Document(doc_id="b:3", source_type=SourceType.book, sections=_chapters(5, 400))
    cfg = SegmentConfig(max_unit_tokens=1000, passage_tokens=200, passage_overlap_tokens=0)
    seg = segment_document(doc, cfg)
    units = {}
    for p in seg.passages:
        units.setdefault(p.unit, set()).add(p.heading_path[0])
    # 400-token chapters, cap 1000: two chapters per unit, never a chapter across units
    assert units == {0: {"Chapter 0", "Chapter 1"}, 1: {"Chapter 2", "Chapter 3"}, 2: {"Chapter 4"}}
    assert seg.truncated_sections == 0


def test_medr2_unit_truncated_only_when_no_chapter_fits():
    doc = Document(doc_id="b:4", source_type=SourceType.book,
                   sections=[Section(title="Huge", text=" ".join(["word"] * 3000)), *_chapters(1, 100)])
    cfg = SegmentConfig(max_unit_tokens=1000, passage_tokens=200, passage_overlap_tokens=0)
    seg = segment_document(doc, cfg)
    huge = [p for p in seg.passages if p.heading_path == ["Huge"]]
    assert sum(count_tokens(p.text) for p in huge) == 1000
    assert seg.truncated_sections == 1
    assert any(p.heading_path == ["Chapter 0"] for p in seg.passages)
    # "split" keeps everything, in several units
    seg2 = segment_document(doc, cfg.model_copy(update={"unit_overflow": "split"}))
    huge2 = [p for p in seg2.passages if p.heading_path == ["Huge"]]
    assert sum(count_tokens(p.text) for p in huge2) == 3000
    assert len({p.unit for p in huge2}) == 3


def test_descends_into_subchapters_of_a_long_chapter():
    big = Section(title="Part", children=[Section(title=f"S{i}", text=" ".join(["w"] * 600)) for i in range(3)])
    doc = Document(doc_id="b:5", sections=[big])
    seg = segment_document(doc, SegmentConfig(max_unit_tokens=1000, passage_tokens=300, passage_overlap_tokens=0))
    assert seg.truncated_sections == 0
    by_unit = {}
    for p in seg.passages:
        by_unit.setdefault(p.unit, set()).add(p.heading_path[-1])
    assert sorted(map(sorted, by_unit.values())) == [["S0"], ["S1"], ["S2"]]


def test_chinese_passages_language():
    doc = Document(doc_id="z:1", sections=[Section(title="治疗", text="二甲双胍是2型糖尿病的一线药物。肾功能不全时应减量。")])
    seg = segment_document(doc, SegmentConfig())
    assert seg.passages and all(p.language == "zh" for p in seg.passages)


@pytest.mark.parametrize("min_chars,max_chars", [(50, 500), (30, 200)])
def test_guideline_rules_hold_on_real_ngc_summaries(min_chars, max_chars):
    import json

    from conftest import shared
    from medr2.ingest.loaders.corpora import ngc_record

    path = shared("corpora/guidelines/ngc_summaries.jsonl")
    cfg = SegmentConfig(guideline_min_chars=min_chars, guideline_max_chars=max_chars)
    n = over = under = 0
    with path.open() as fh:
        for i, line in enumerate(fh):
            if i == 40:
                break
            seg = segment_document(ngc_record(json.loads(line), "x"), cfg)
            _check_offsets(seg)
            for p in seg.passages:
                n += 1
                over += len(p.text) > max_chars
                under += len(p.text) < min_chars
    assert n > 1000
    assert under == 0
    assert over / n < 0.005  # only where merging a short section forces it


def test_split_overflow_passages_never_straddle_units():
    text = " ".join(f"Sentence {i} has exactly seven tokens." for i in range(400))  # 2,800 tokens
    doc = Document(doc_id="b:6", sections=[Section(title="Huge", text=text)])
    cfg = SegmentConfig(max_unit_tokens=1000, unit_overflow="split", passage_tokens=180, passage_overlap_tokens=0)
    seg = segment_document(doc, cfg)
    per_unit = {}
    for p in seg.passages:
        per_unit[p.unit] = per_unit.get(p.unit, 0) + count_tokens(p.text)
    assert sorted(per_unit) == [0, 1, 2]
    assert all(n <= 1000 for n in per_unit.values()), per_unit
    assert sum(per_unit.values()) == 2800
