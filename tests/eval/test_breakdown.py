"""Where evidence helps and where it hurts: paired counts by group, McNemar verdicts."""

from medr2.eval.breakdown import group_table, paired_by_group


def test_groups_pair_only_questions_both_answered_and_call_significant_splits():
    # 12 therapy questions the method gets right and the baseline wrong; 12 diagnosis questions the
    # reverse; 3 prognosis questions split 2/1; q-extra answered by the method only
    method, base, group = {}, {}, {}
    for i in range(12):
        method[f"t{i}"], base[f"t{i}"], group[f"t{i}"] = True, False, "therapy"
        method[f"d{i}"], base[f"d{i}"], group[f"d{i}"] = False, True, "diagnosis"
    for i, (m, b) in enumerate([(True, False), (True, False), (False, True)]):
        method[f"p{i}"], base[f"p{i}"], group[f"p{i}"] = m, b, "prognosis"
    method["extra"], group["extra"] = True, "therapy"
    rows = {r.group: r for r in paired_by_group(method, base, group, min_n=5)}
    assert set(rows) == {"all", "therapy", "diagnosis"}  # prognosis has 3 < 5 questions
    assert rows["all"].n == 27 and (rows["all"].only_method, rows["all"].only_base) == (14, 13)
    assert rows["therapy"].n == 12 and rows["therapy"].verdict == "helps" and rows["therapy"].p < 0.001
    assert rows["diagnosis"].verdict == "hurts" and rows["diagnosis"].delta == -100.0
    assert rows["all"].verdict == "no difference shown"
    table = group_table(list(rows.values()), "EBM category")
    assert table.splitlines()[0].startswith("| EBM category | N |") and "| therapy | 12 | 0 | 12 | +100.0 |" in table
