"""Benchmark loaders into one typed model (:class:`medr2.schema.EvalQuestion`).

Formats: MIRAGE ``benchmark.json`` (``{dataset: {id: {question, options, answer[, PMID]}}}``),
XMedBench JSONL (``option`` block "(A) ...\\n(B) ..." and the misspelt ``anwer`` key; a
``context`` field is kept; a multiple-answer key such as "(ABE)" keeps every letter), MMLU CSV
(headerless question,A,B,C,D,answer), PubMedQA ``ori_pqal.json`` (yes/no/maybe mapped to A/B/C
as MIRAGE does), TCMBench ``{type, example}`` JSON (a case vignette's shared case opens each of its
sub-questions; dataset ``tcmbench-CVR`` / ``-FKU`` / ``-KHC``). An answer that names no option is refused with the file and record.

Example::

    >>> from medr2.eval.datasets import parse_option_block
    >>> parse_option_block("(A) Aspirin.\\n(B) Heparin.")
    {'A': 'Aspirin', 'B': 'Heparin'}
"""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Iterator

from medr2.ingest.loaders.records import strict_jsonl
from medr2.schema import EvalQuestion

_OPT = re.compile(r"^\s*\(?([A-J])\)\s*(.*)$")
PUBMEDQA_OPTIONS = {"A": "yes", "B": "no", "C": "maybe"}


class DatasetError(ValueError):
    """A benchmark file that cannot be read; the message names the file and the record."""


def parse_option_block(block: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in block.splitlines():
        m = _OPT.match(line)
        if m:
            out[m.group(1)] = m.group(2).strip().rstrip(".").strip()
        elif out and line.strip():  # continuation of the previous option
            last = list(out)[-1]
            out[last] = (out[last] + " " + line.strip()).strip().rstrip(".").strip()
    return out


def pmid_text(value) -> str | None:
    """MIRAGE stores PMID as a list ([12377809]); one PMID, or several comma-separated, as text.

    >>> pmid_text([12377809]), pmid_text("1"), pmid_text([1, 2]), pmid_text(None)
    ('12377809', '1', '1,2', None)
    """
    if value in (None, "", []):
        return None
    return ",".join(str(v) for v in value) if isinstance(value, (list, tuple)) else str(value)


def _checked(q: EvalQuestion, where: str) -> EvalQuestion:
    """The question, once its answer is one of its options (each letter of a multiple answer)."""
    if q.options and (not q.answer or any(x not in q.options for x in q.answer)):
        raise DatasetError(f"{where}: the answer {q.answer!r} is not among the options {sorted(q.options)}")
    return q


def load_mirage(path: str | Path, datasets: list[str] | None = None) -> Iterator[EvalQuestion]:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DatasetError(f"{p}: not a MIRAGE benchmark.json ({e})") from None
    for name, items in data.items():
        if datasets and name not in datasets:
            continue
        for qid, r in items.items():
            try:
                q = EvalQuestion(dataset=name, id=str(qid), question=r["question"], options=dict(r["options"]),
                                 answer=str(r["answer"]).strip(), pmid=pmid_text(r.get("PMID")))
            except (KeyError, TypeError) as e:
                raise DatasetError(f"{p}: {name}/{qid} lacks {e}") from None
            yield _checked(q, f"{p}: {name}/{qid}")


def load_xmedbench(path: str | Path) -> Iterator[EvalQuestion]:
    p = Path(path)
    for where, r in strict_jsonl(p, DatasetError):
        try:
            answer = r.get("anwer", r.get("answer"))
            m = re.fullmatch(r"\s*\(?([A-J]+)\)?\.?\s*", str(answer))
            opts = parse_option_block(r["option"])
        except (KeyError, TypeError, AttributeError) as e:
            raise DatasetError(f"{where}: not an XMedBench record ({e})") from None
        if not m or not opts:
            raise DatasetError(f"{where}: no answer letter(s) such as \"(B)\" or \"(ABE)\" ({answer!r}), or no options")
        n = where.rsplit(":", 1)[1]
        yield _checked(EvalQuestion(dataset=str(r.get("source") or p.stem), id=f"{p.stem}-{n}", question=r["question"],
                                    options=opts, answer="".join(sorted(set(m.group(1)))),
                                    context=r.get("context") or None), where)


def load_mmlu_csv(path: str | Path) -> Iterator[EvalQuestion]:
    p = Path(path)
    with open(p, encoding="utf-8", newline="") as fh:
        for n, row in enumerate(csv.reader(fh), 1):
            if len(row) != 6:
                raise DatasetError(f"{p}:{n}: expected question,A,B,C,D,answer ({len(row)} fields)")
            yield _checked(EvalQuestion(dataset=f"mmlu:{p.stem}", id=f"{p.stem}-{n}", question=row[0],
                                        options=dict(zip("ABCD", row[1:5])), answer=row[5].strip().upper()), f"{p}:{n}")


def load_pubmedqa(path: str | Path) -> Iterator[EvalQuestion]:
    p = Path(path)
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise DatasetError(f"{p}: not PubMedQA ori_pqal.json ({e})") from None
    letter = {v: k for k, v in PUBMEDQA_OPTIONS.items()}
    for pmid, r in data.items():
        decision = str(r.get("final_decision", "")).strip().lower()
        if decision not in letter:
            raise DatasetError(f"{p}: {pmid}: final_decision {r.get('final_decision')!r} is not yes, no or maybe")
        try:
            yield EvalQuestion(dataset="pubmedqa", id=str(pmid), question=r["QUESTION"], options=dict(PUBMEDQA_OPTIONS),
                               answer=letter[decision], context=" ".join(r.get("CONTEXTS", [])), pmid=str(pmid))
        except (KeyError, TypeError) as e:
            raise DatasetError(f"{p}: {pmid} lacks {e}") from None


def load_tcmbench(path: str | Path) -> Iterator[EvalQuestion]:
    from medr2.ingest.loaders.base import LoadError
    from medr2.ingest.loaders.tcmbench import read_tcmbench

    try:
        for it in read_tcmbench(path):
            yield EvalQuestion(dataset=f"tcmbench-{it.kind}", id=it.id, question=it.text, options=dict(it.options),
                               answer=it.answer)
    except LoadError as e:
        raise DatasetError(str(e)) from None
