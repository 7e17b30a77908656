import json

import pytest
from conftest import shared
from helpers import MIXED_HTML, MIXED_MD, write_jsonl, write_pdf

from medr2.config import Config
from medr2.ingest.loaders.base import LoadError, Problem, get_loader
from medr2.ingest.pipeline import choose_loader


def _docs(items):
    return [i for i in items if not isinstance(i, Problem)]


def _problems(items):
    return [i for i in items if isinstance(i, Problem)]


def load(name, path, cfg=None):
    return list(get_loader(name).load(path, cfg or Config()))


def test_markdown_front_matter_and_heading_tree(tmp_path):
    p = tmp_path / "g.md"
    p.write_text(MIXED_MD, encoding="utf-8")
    (doc,) = load("markdown", p)
    assert doc.doc_id == "test:metformin-ckd" and doc.source_type.value == "guideline"
    assert doc.meta.year == 2024 and doc.meta.publication_types == ["Practice Guideline"]
    assert [h for h, _ in doc.walk()] == [
        ("Metformin in kidney disease",),
        ("Metformin in kidney disease", "Recommendations"),
        ("Metformin in kidney disease", "Monitoring"),
    ]


def test_markdown_setext_headings_and_code_blocks(tmp_path):
    p = tmp_path / "s.md"
    p.write_text("Title\n=====\n\nIntro text.\n\nPart\n----\n\n```\n# not a heading\n```\nBody.\n", encoding="utf-8")
    (doc,) = load("markdown", p)
    assert [h for h, _ in doc.walk()] == [("Title",), ("Title", "Part")]
    assert "# not a heading" in doc.full_text()
    assert doc.doc_id.startswith("md:s-")


def test_a_paragraph_behind_a_stray_hash_is_text_not_a_heading(tmp_path):
    long = "Guideline: for postmenopausal patients with benign endometrial cells " + "assessment is advised " * 15
    p = tmp_path / "p.md"
    p.write_text(f"# Cervical screening\n\nIntro text.\n\n## {long.strip()}\n", encoding="utf-8")
    (doc,) = load("markdown", p)
    assert [h for h, _ in doc.walk()] == [("Cervical screening",)]
    assert "postmenopausal patients" in doc.full_text()  # its words reach a passage


def test_markdown_bad_front_matter_is_reported(tmp_path):
    p = tmp_path / "b.md"
    p.write_text("---\nsource_type: pamphlet\n---\n# X\n\ntext\n", encoding="utf-8")
    with pytest.raises(LoadError, match="source_type"):
        load("markdown", p)


def test_html_headings_and_dropped_scripts(tmp_path):
    p = tmp_path / "a.html"
    p.write_text(MIXED_HTML, encoding="utf-8")
    (doc,) = load("html", p)
    assert doc.title == "Asthma basics"
    assert [h for h, _ in doc.walk()] == [("Asthma basics",), ("Asthma basics", "Treatment")]
    text = doc.full_text()
    assert "do not index me" not in text and "Home | About" not in text
    assert "Inhaled corticosteroids" in text and "Short-acting beta agonists" in text


def test_pdf_text_layer_and_bookmarks(tmp_path):
    p = write_pdf(tmp_path / "x.pdf", [["Intro page text about gout."], ["Allopurinol lowers urate."],
                                       ["Colchicine treats flares."]],
                  outline=[("Therapy", 1), ("Flares", 2)])
    (doc,) = load("pdf", p)
    heads = [h for h, _ in doc.walk()]
    assert ("Therapy",) in heads and ("Flares",) in heads
    assert "Allopurinol lowers urate." in doc.full_text()
    assert doc.full_text().index("Intro page") < doc.full_text().index("Allopurinol")


def test_pdf_without_bookmarks_reads_numbered_headings(tmp_path):
    p = write_pdf(tmp_path / "g.pdf", [["Gout guideline", "1 Diagnosis", "Joint aspiration shows crystals."],
                                       ["2 Therapy", "Treat to target.", "2.1 Urate lowering", "Allopurinol first."]])
    (doc,) = load("pdf", p)
    heads = [h for h, _ in doc.walk() if h]
    assert heads == [("1 Diagnosis",), ("2 Therapy",), ("2 Therapy", "2.1 Urate lowering")]
    assert "Allopurinol first." in doc.full_text()


def test_pdf_corrupt_and_empty(tmp_path):
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.4\ngarbage\x00\x01")
    with pytest.raises(LoadError):
        load("pdf", bad)
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    with pytest.raises(LoadError, match="empty"):
        load("pdf", empty)


def test_text_rejects_non_utf8_binary_and_whitespace(tmp_path):
    a = tmp_path / "a.txt"
    a.write_bytes("caf\xe9".encode("latin-1"))
    with pytest.raises(LoadError, match="UTF-8"):
        load("text", a)
    b = tmp_path / "b.txt"
    b.write_bytes(b"abc\x00def")
    with pytest.raises(LoadError, match="binary"):
        load("text", b)
    c = tmp_path / "c.txt"
    c.write_text("   \n\t\n")
    with pytest.raises(LoadError, match="whitespace"):
        load("text", c)


def test_text_size_limit(tmp_path):
    p = tmp_path / "big.txt"
    p.write_text("word " * 300_000)  # 1.5 MB
    cfg = Config()
    cfg.ingest.max_whole_file_mb = 1
    with pytest.raises(LoadError, match="max_whole_file_mb"):
        load("text", p, cfg)


def test_jsonl_mapping_bad_lines_and_list_records(tmp_path):
    p = write_jsonl(tmp_path / "r.jsonl", [{"pmid": 7, "abstract": "Aspirin text.", "pub": {"year": "2001"}},
                                           ["A raw guideline chunk as a one-element list."]])
    with p.open("a") as fh:
        fh.write("{not json}\n")
        fh.write('{"pmid": 8}\n')
    with p.open("ab") as fh:
        fh.write(b'{"pmid": 9, "abstract": "\xff"}\n')
    cfg = Config()
    cfg.ingest.json_fields = {"id": "pmid", "text": "abstract", "year": "pub.year"}
    items = load("jsonl", p, cfg)
    docs, probs = _docs(items), _problems(items)
    assert [d.doc_id for d in docs][0] == "jsonl:7" and docs[0].meta.year == 2001
    assert docs[1].full_text().startswith("A raw guideline chunk")
    reasons = " | ".join(f"{p.path} {p.reason}" for p in probs)
    assert ":3 invalid JSON" in reasons and ":4 no text" in reasons and ":5 line is not valid UTF-8" in reasons


def test_jsonl_default_fields_read_medrag_style(tmp_path):
    p = write_jsonl(tmp_path / "c.jsonl", [{"id": "stat_1", "title": "Sepsis", "content": "Sepsis is ...",
                                            "contents": "Sepsis. Sepsis is ..."}])
    (doc,) = load("jsonl", p)
    assert doc.doc_id == "jsonl:stat_1" and doc.title == "Sepsis"


def test_unknown_mapping_target_is_refused(tmp_path):
    p = write_jsonl(tmp_path / "c.jsonl", [{"id": 1, "text": "x"}])
    cfg = Config()
    cfg.ingest.json_fields = {"body": "text"}
    with pytest.raises(LoadError, match="unknown mapping"):
        load("jsonl", p, cfg)


def test_json_object_keyed_by_id_and_list_of_strings(tmp_path):
    a = tmp_path / "a.json"
    a.write_text(json.dumps({"x1": {"text": "First."}, "x2": {"text": "Second."}}))
    assert [d.doc_id for d in _docs(load("json", a))] == ["json:x1", "json:x2"]
    b = tmp_path / "b.json"
    b.write_text(json.dumps(["Title one. Abstract one.", "Title two. Abstract two."]))
    assert len(_docs(load("json", b))) == 2


def test_choose_loader_by_suffix_content_and_format(tmp_path):
    p = tmp_path / "x.jsonl"
    p.write_text('{"ngc_id": 1, "title": "t", "sections": []}\n')
    assert choose_loader(p, None).name == "ngc"
    assert choose_loader(tmp_path / "a.md", None).name == "markdown"
    assert choose_loader(tmp_path / "a.weird", "text").name == "text"
    with pytest.raises(LoadError, match="unsupported file type"):
        choose_loader(tmp_path / "a.weird", None)
    with pytest.raises(LoadError, match="unknown format"):
        choose_loader(p, "docx")


# --- real corpora in ../shared/data ------------------------------------------------------------

def _first(path, n, name):
    out = []
    for item in get_loader(name).load(path, Config()):
        out.append(item)
        if len(out) >= n:
            break
    return out


def test_ngc_summaries_heading_tree():
    path = shared("corpora/guidelines/ngc_summaries.jsonl")
    assert choose_loader(path, None).name == "ngc"
    doc = _first(path, 1, "ngc")[0]
    assert doc.doc_id == "ngc:2052" and doc.source_type.value == "guideline"
    heads = [h for h, _ in doc.walk()]
    assert ("Recommendations", "Major Recommendations") in heads
    assert ("Scope", "Target Population") in heads
    assert doc.meta.publication_types == ["Practice Guideline"]


def test_openstax_modules_path_and_glossary():
    path = shared("corpora/textbooks/anatomy_physiology_2e.jsonl")
    assert choose_loader(path, None).name == "openstax"
    docs = _first(path, 6, "openstax")
    d = docs[5]
    assert d.doc_id.startswith("openstax:m") and d.source_type.value == "book"
    path_titles = [h for h, _ in d.walk()]
    assert path_titles[0] == ("Anatomy and Physiology 2e",)
    assert any(h[-1] == "Glossary" for h in path_titles)
    assert any(len(h) >= 4 for h in path_titles)  # book > unit > chapter > module


def test_pubmedqa_contexts_labels_meshes_year():
    path = shared("benchmarks/pubmedqa/ori_pqal.json")
    assert choose_loader(path, None).name == "pubmedqa"
    raw = json.loads(path.read_text())
    pmid, rec = next(iter(raw.items()))
    d = _first(path, 1, "pubmedqa")[0]
    assert d.doc_id == f"pmid:{pmid}" and d.source_type.value == "paper"
    assert [s.text for s in d.sections] == [c.strip() for c in rec["CONTEXTS"]]
    assert [s.labels for s in d.sections] == [[lab] for lab in rec["LABELS"]]
    assert d.meta.mesh_terms == rec["MESHES"] and d.meta.year == int(rec["YEAR"])
    # the question is not part of the document (it paraphrases the title)
    assert rec["QUESTION"] not in d.full_text()


def test_medquad_entries_skip_unanswered():
    path = shared("corpora/medquad/medquad.jsonl")
    assert choose_loader(path, None).name == "medquad"
    docs = _docs(_first(path, 5, "medquad"))
    assert all(d.doc_id.startswith("medquad:") and d.source_type.value == "entry" for d in docs)
    assert all(d.full_text().strip() for d in docs)
    assert all(d.meta.extra.get("qtype") for d in docs)


def test_medlineplus_csv():
    path = shared("corpora/encyclopedia/medline_health_topics_en.csv")
    assert choose_loader(path, None).name == "medlineplus"
    d = _first(path, 1, "medlineplus")[0]
    assert d.doc_id == "medlineplus:6308" and d.title == "A1C" and d.source_type.value == "entry"
    assert "HbA1C" in d.meta.extra["also_called"]


def test_raw_guideline_chunks_generic_jsonl():
    path = shared("corpora/guidelines/raw_guideline_chunks_en.jsonl")
    items = list(get_loader("jsonl").load(path, Config()))
    assert len(_docs(items)) == 100 and not _problems(items)


def test_html_unclosed_heading_does_not_swallow_the_page(tmp_path):
    p = tmp_path / "u.html"
    p.write_text("<h1>Title<p>First paragraph text.</p><h2>Part</h2><p>More text.</p>", encoding="utf-8")
    (doc,) = load("html", p)
    assert [h for h, _ in doc.walk()] == [("Title",), ("Title", "Part")]
    assert "First paragraph text." in doc.full_text()


def test_broken_records_become_problems_not_crashes(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text('{"qid": "1", "qtype": "x", "question": "q?", "answer": "a"}\n["not", "a", "record"]\n')
    items = list(get_loader("medquad").load(p, Config()))
    assert len(_docs(items)) == 1 and "MedQuAD" in _problems(items)[0].reason


def test_source_type_flag_reaches_text_markdown_and_html(tmp_path):
    cfg = Config()
    cfg.ingest.source_type = "book"
    txt = tmp_path / "terms.txt"
    txt.write_text("Yin syndrome: a class of syndromes marked by inhibition.\n", encoding="utf-8")
    assert load("text", txt, cfg)[0].source_type.value == "book"
    assert load("text", txt)[0].source_type.value == "other"  # no flag: the default
    md = tmp_path / "g.md"
    md.write_text("---\nsource_type: guideline\n---\n# Title\n\nOffer metformin.\n", encoding="utf-8")
    assert load("markdown", md, cfg)[0].source_type.value == "guideline"  # front matter wins
    html = tmp_path / "p.html"
    html.write_text("<html><body><h1>T</h1><p>Some text here.</p></body></html>", encoding="utf-8")
    assert load("html", html, cfg)[0].source_type.value == "book"


# --- numbered headings in plain text (ingest/outline.py) ---------------------------------------

from medr2.ingest.outline import outline_blocks  # noqa: E402


def _heads(text):
    return [(b.level, b.heading) for b in outline_blocks(text) if b.heading]


def test_outline_decimal_numbers_number_only_entries_and_toc():
    text = ("Contents\n1 Scope\t1\n2 Therapy\t3\n"  # a table of contents: tab + page number
            "1 Scope\nAdults with type 2 diabetes.\n"
            "2 Therapy\nDrug choices.\n2.1\n    Metformin  first line\nStart at 500 mg.\n"
            "2.2 Insulin\nWhen HbA1c stays high.\n2.2.1 Basal insulin\nBedtime dose.\n3 Monitoring\nEvery 3 months.\n")
    assert _heads(text) == [(1, "1 Scope"), (1, "2 Therapy"), (2, "2.1 Metformin  first line"),
                            (2, "2.2 Insulin"), (3, "2.2.1 Basal insulin"), (1, "3 Monitoring")]
    blocks = outline_blocks(text)
    assert blocks[0].level == 0 and "Contents" in blocks[0].text  # the toc stays text before the first heading
    assert next(b for b in blocks if b.heading.startswith("2.1")).text.strip() == "Start at 500 mg."


def test_outline_leaves_lists_doses_and_sentences_alone():
    assert _heads("Steps:\n1. Take aspirin daily.\n2. Check the blood pressure.\n3. Review in a week.\n") == []
    assert _heads("Dosing\n10 mg daily\n20 mg at night\nNo more.\n") == []
    # numbered paragraphs that wrap (a licence's clauses) are not an outline
    assert _heads("   1. Definitions.\n   text\n   2. Grant of Copyright License. Subject to the terms\n   more\n"
                  "   3. Grant of Patent License. Subject to the terms and conditions of\n   more\n") == []
    assert _heads("1 Scope\nText.\n2 St. John's wort\nText.\n") == [(1, "1 Scope"), (1, "2 St. John's wort")]
    # a number out of sequence is body text, not a heading
    assert _heads("1 Scope\nText.\n2 Therapy\nText.\n7 people were treated\nMore text.\n") == \
        [(1, "1 Scope"), (1, "2 Therapy")]
    # one heading is not an outline: the text stays one section
    blocks = outline_blocks("1 Scope\nJust this.\n")
    assert [(b.level, b.heading) for b in blocks] == [(0, "")]


def test_outline_is_not_fooled_by_dates_prose_doses_and_running_headers():
    # a date before the outline does not become heading 15 and block the real one
    assert _heads("15 March 2021\nIntro body.\n1. Scope\nAdults.\n2. Methods\nTrials.\n") == \
        [(1, "1 Scope"), (1, "2 Methods")]
    # prose that mentions a part or chapter, in English or Chinese
    prose = ("1 Scope\nText.\nPart 1 of the trial enrolled adults with\nasthma.\n患者的治疗方案详见第三章中有关\n"
             "内容。\n2 Therapy\nText.\n")
    assert _heads(prose) == [(1, "1 Scope"), (1, "2 Therapy")]
    # doses and wrapped numbered sentences
    assert _heads("Dosing\n1 tablet at night\nor\n2 mg/kg twice\nthen\n1 μg/kg\nmore\n") == []
    assert _heads("1. Offer metformin to adults with type 2\ndiabetes first.\n2. Add a sulfonylurea if the\n"
                  "target is missed.\n") == []
    # a running header repeated on every page is one chapter, not one per page
    pages = "CHAPTER 3 Diabetes\n3.1 Diagnosis\nHbA1c.\nCHAPTER 3 Diabetes\n3.2 Therapy\nMetformin.\n"
    assert _heads(pages) == [(1, "CHAPTER 3 Diabetes"), (3, "3.1 Diagnosis"), (3, "3.2 Therapy")]
    # Chinese "1、" and full-width "1．" numbering
    assert _heads("1、总则\n本指南适用于成人。\n2、诊断\n依据症状。\n2.1 体征\n发热。\n") == \
        [(1, "1 总则"), (1, "2 诊断"), (2, "2.1 体征")]


def test_outline_chinese_parts_chapters_and_restarted_numbering():
    text = ("中医临床诊疗术语 第2部分：证候\n1\u3000范围\n本文件收录证候术语。\n2\u3000八纲证候类术语\n泛指八纲。\n"
            "2.1\n    阴证  yin syndrome\n与阳证相对。\n"
            "中医临床诊疗术语 第3部分：治法\n1\u3000范围\n本文件收录治法术语。\n2\u3000治则类术语\n泛指治则。\n"
            "本文件为《中医临床诊疗术语》的第2部分。\n")
    assert _heads(text) == [(1, "中医临床诊疗术语 第2部分：证候"), (2, "1 范围"), (2, "2 八纲证候类术语"),
                            (3, "2.1 阴证  yin syndrome"), (1, "中医临床诊疗术语 第3部分：治法"), (2, "1 范围"),
                            (2, "2 治则类术语")]
    assert _heads("第一章 总论\n概述。\n第一节 病因\n外感。\n第二节 病机\n内伤。\n第二章 各论\n分述。\n") == \
        [(1, "第一章 总论"), (2, "第一节 病因"), (2, "第二节 病机"), (1, "第二章 各论")]


def test_text_loader_builds_the_tree_from_numbered_headings(tmp_path):
    p = tmp_path / "std.txt"
    p.write_text("Diabetes standard\n1 Scope\nAdults.\n2 Therapy\nDrugs.\n2.1 Metformin\nFirst line.\n", encoding="utf-8")
    (doc,) = load("text", p)
    assert [h for h, _ in doc.walk()] == [(), ("1 Scope",), ("2 Therapy",), ("2 Therapy", "2.1 Metformin")]
    assert "Diabetes standard" in doc.full_text()  # the text before the first heading is kept
    cfg = Config()
    cfg.ingest.numbered_headings = False
    (flat,) = load("text", p, cfg)
    assert [h for h, _ in flat.walk()] == [()]


def test_gbt16751_terms_standard_gets_its_outline():
    path = shared("corpora/chinese/tcm_terminology_gbt16751/GBT16751-2021_TCM_clinical_terms_parts1-3.txt")
    (doc,) = load("text", path)
    heads = [h for h, _ in doc.walk()]
    assert len(heads) > 3900  # every numbered term entry of the three parts
    assert any(h[-1].startswith("2.1 阴证") and h[-2].startswith("2 八纲证候类术语") for h in heads if len(h) >= 2)
    assert sum(1 for h in heads if len(h) == 1 and "部分" in h[0]) >= 3
