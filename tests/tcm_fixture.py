"""A small TCM world for the TCM-DiffRAG tests: a GB/T 16751-style terms text and TCMBench-style
files, written by hand for these tests (not taken from the standard or the benchmark)."""

from __future__ import annotations

import json
from pathlib import Path

GBT_TEXT = """中医临床诊疗术语 第2部分：证候
5.2.1
    肝火上炎证  syndrome/pattern of liver fire flaming up
    肝火上扰证
    因肝火炽盛，气火上犯清窍所致。临床以头痛，面赤，目赤，耳暴鸣，口苦，舌质红，舌苔黄，脉弦数等为特征的证候。

5.2.2
    肝阳上亢证  syndrome/pattern of liver yang hyperactivity
    因肝肾阴亏，肝阳亢扰于上所致。临床以眩晕，耳鸣，头目胀痛，腰膝酸软，舌质红，脉弦细数等为特征的证候。

5.3.1
    脾气虚证  syndrome/pattern of spleen qi deficiency
    因脾气不足，运化失职所致。临床以食少，腹胀，便溏，神疲乏力，舌质淡，舌苔白，脉缓弱等为特征的证候。
中医临床诊疗术语 第3部分：治法
3.1.1
    清肝泻火法  method of clearing liver and purging fire
    针对肝火上炎证的治法。
"""

PROMPT = "请你回答中医测试中的题目。"


def sub(stem: str, options: list[str], answer: str, analysis: str = "") -> dict:
    opts = "".join(f"{k}．{v}\n" for k, v in zip("ABCDE", options))
    return {"sub_question": f"1)．{stem}\n{opts}", "answer": [answer], "analysis": analysis}


SYNDROMES = ["肝火上炎证", "肝阳上亢证", "脾气虚证", "心火亢盛证", "胃热证"]
CVR_TRAIN = {"type": "CVR", "prefix_prompt": PROMPT, "keywords": "A3", "example": [
    {"share_content": "某男，45岁。头痛，面赤，目赤，口苦，急躁易怒，舌质红，苔黄，脉弦数。", "index": 1, "question": [
        sub("该病例辨证为（  ）。", SYNDROMES, "A", "头痛面赤，口苦，脉弦数，为肝火上炎。"),
        sub("其治法为（  ）。", ["清肝泻火", "平肝潜阳", "健脾益气", "清心泻火", "清胃泻火"], "A"),
        sub("治疗应首选的方剂是（  ）。", ["龙胆泻肝汤", "天麻钩藤饮", "四君子汤", "导赤散", "清胃散"], "A")]},
    {"share_content": "某女，50岁。食少，腹胀，便溏，神疲乏力，舌淡，苔白，脉缓弱。", "index": 2, "question": [
        sub("该病例辨证为（  ）。", SYNDROMES, "C"),
        sub("治疗应首选的方剂是（  ）。", ["龙胆泻肝汤", "天麻钩藤饮", "四君子汤", "导赤散", "清胃散"], "C")]},
]}
FKU_TRAIN = {"type": "FKU", "prefix_prompt": PROMPT, "keywords": "A1", "example": [
    {"question": "“至虚有盛候”的病机是（  ）。\nA．由实转虚\nB．实中夹虚\nC．真实假虚\nD．真虚假实\nE．虚实错杂",
     "answer": ["D"], "analysis": "本质为虚，表现似实。", "index": 7},
    {"question": "\n", "answer": ["A"], "analysis": "", "index": 8},
]}
KHC = {"type": "KHC", "prefix_prompt": PROMPT, "keywords": "B1", "example": [
    {"share_content": "（共用备选答案）\nA.麻黄\nB.桂枝\nC.石膏\nD.知母\nE.黄连\n", "index": 3, "question": [
        {"sub_question": "1)．善于发汗解表的药物是（  ）。", "answer": ["A"], "analysis": ""},
        {"sub_question": "2)．善于清热泻火、除烦止渴的药物是（  ）。", "answer": ["C"], "analysis": ""}]},
]}
HELD_OUT = {"type": "FKU", "prefix_prompt": PROMPT, "keywords": "A2", "example": [
    {"question": "患者，男，38岁。头痛，目赤，口苦，耳鸣，舌质红，苔黄，脉弦数。其证型为（  ）。\n"
                 + "".join(f"{k}．{v}\n" for k, v in zip("ABCDE", SYNDROMES)), "answer": ["A"], "analysis": "",
     "index": 90},
]}


def write_world(root: Path) -> dict[str, Path]:
    root.mkdir(parents=True, exist_ok=True)
    paths = {"gbt": root / "gbt16751.txt", "cvr": root / "CVR.json", "fku": root / "FKU.json",
             "khc": root / "KHC.json", "held_out": root / "held_out.json"}
    paths["gbt"].write_text(GBT_TEXT, encoding="utf-8")
    for key, data in (("cvr", CVR_TRAIN), ("fku", FKU_TRAIN), ("khc", KHC), ("held_out", HELD_OUT)):
        paths[key].write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return paths
