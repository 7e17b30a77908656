"""Test helpers: a minimal PDF writer (real PDF syntax with a text layer) and corpus builders."""

from __future__ import annotations

import json
from pathlib import Path


def _esc(s: str) -> str:
    return s.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def write_pdf(path: Path, pages: list[list[str]], outline: list[tuple[str, int]] | None = None) -> Path:
    """Write a PDF whose pages hold the given lines in Helvetica; optional bookmarks (title, page)."""
    objs: list[bytes] = []
    n_pages = len(pages)
    font_id = 3 + 2 * n_pages
    page_ids = [3 + 2 * i for i in range(n_pages)]
    outline_root = font_id + 1 if outline else None
    cat = b"<< /Type /Catalog /Pages 2 0 R" + (f" /Outlines {outline_root} 0 R".encode() if outline else b"") + b" >>"
    objs.append(cat)
    objs.append(f"<< /Type /Pages /Kids [{' '.join(f'{p} 0 R' for p in page_ids)}] /Count {n_pages} >>".encode())
    for i, lines in enumerate(pages):
        content = "BT /F1 11 Tf 14 TL 72 740 Td " + " ".join(f"({_esc(line)}) Tj T*" for line in lines) + " ET"
        objs.append(f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {page_ids[i] + 1} 0 R "
                    f"/Resources << /Font << /F1 {font_id} 0 R >> >> >>".encode())
        data = content.encode("latin-1")
        objs.append(b"<< /Length " + str(len(data)).encode() + b" >>\nstream\n" + data + b"\nendstream")
    objs.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    if outline:
        first = outline_root + 1
        last = outline_root + len(outline)
        objs.append(f"<< /Type /Outlines /First {first} 0 R /Last {last} 0 R /Count {len(outline)} >>".encode())
        for j, (title, page) in enumerate(outline):
            me = first + j
            links = (f" /Prev {me - 1} 0 R" if j else "") + (f" /Next {me + 1} 0 R" if me < last else "")
            objs.append(f"<< /Title ({_esc(title)}) /Parent {outline_root} 0 R{links} "
                        f"/Dest [{page_ids[page]} 0 R /XYZ 0 792 0] >>".encode())
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for i, o in enumerate(objs, 1):
        offsets.append(len(out))
        out += f"{i} 0 obj\n".encode() + o + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objs) + 1}\n0000000000 65535 f \n".encode()
    for off in offsets:
        out += f"{off:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objs) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    path.write_bytes(bytes(out))
    return path


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


MIXED_MD = """---
id: test:metformin-ckd
title: Metformin in kidney disease
source_type: guideline
year: 2024
publication_types: [Practice Guideline]
---
# Metformin in kidney disease

## Recommendations

Metformin can be continued at a reduced dose when the eGFR is between 30 and 44 mL/min/1.73 m2.

Stop metformin when the eGFR falls below 30 mL/min/1.73 m2 because of the risk of lactic acidosis.

## Monitoring

Check the eGFR at least once a year, and every three to six months when it is below 60.
"""

MIXED_HTML = """<html><head><title>Asthma basics</title><script>var x = "do not index me";</script></head>
<body><nav>Home | About</nav><h1>Asthma basics</h1><p>Asthma is a chronic inflammatory disease of the airways
causing wheeze and breathlessness.</p><h2>Treatment</h2><p>Inhaled corticosteroids are the mainstay of
controller therapy for persistent asthma.</p><ul><li>Short-acting beta agonists relieve symptoms.</li></ul>
</body></html>"""

MIXED_TXT = """Influenza vaccination

Annual influenza vaccination is recommended for adults aged 65 years and older and for people with chronic
heart or lung disease. The vaccine composition is updated every season to match circulating strains."""


def make_mixed_folder(root: Path) -> Path:
    """A folder with every generic format plus bad files; returns it."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "metformin.md").write_text(MIXED_MD, encoding="utf-8")
    (root / "asthma.html").write_text(MIXED_HTML, encoding="utf-8")
    (root / "influenza.txt").write_text(MIXED_TXT, encoding="utf-8")
    write_pdf(root / "gout.pdf", [["Gout management", "Allopurinol is the first-line urate-lowering therapy for",
                                  "recurrent gout flares, started at a low dose and titrated to target urate."],
                                 ["Colchicine prophylaxis is given when starting urate-lowering therapy."]])
    sub = root / "records"
    sub.mkdir(exist_ok=True)
    write_jsonl(sub / "abstracts.jsonl", [
        {"id": "A1", "title": "Statins after stroke", "text": "Statin therapy after ischaemic stroke reduced "
         "recurrent stroke in a randomised trial of 4,700 patients.", "year": 2006, "source_type": "paper",
         "publication_types": ["Randomized Controlled Trial"]},
        {"id": "A2", "title": "Aspirin primary prevention", "text": "Low-dose aspirin for primary prevention "
         "increased major bleeding without reducing cardiovascular mortality in older adults.", "year": 2018,
         "source_type": "paper"},
    ])
    with (sub / "abstracts.jsonl").open("a", encoding="utf-8") as fh:
        fh.write('{"id": "A3", "text": broken json\n')
    (sub / "topics.csv").write_text("id,title,text\nT1,Anaemia,Iron deficiency anaemia is treated with oral "
                                    "iron and investigation of the cause of iron loss.\n", encoding="utf-8")
    # bad files
    (root / "corrupt.pdf").write_bytes(b"%PDF-1.4\n this is not really a pdf \x00\x01")
    (root / "latin1.txt").write_bytes("Caf\xe9 au lait spots are a sign of neurofibromatosis.".encode("latin-1"))
    (root / "empty.md").write_text("", encoding="utf-8")
    (root / "image.bin").write_bytes(bytes(range(256)) * 4)
    return root


def run_cli(*args, ok: bool = True):
    """``medr2 ARGS`` through click's runner (arguments stringified); with ``ok`` it must exit 0."""
    from click.testing import CliRunner

    from medr2.cli import main

    r = CliRunner().invoke(main, [str(a) for a in args])
    if ok:
        assert r.exit_code == 0, r.output + str(r.exception)
    return r
