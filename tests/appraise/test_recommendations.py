"""Recommendation extraction with grades (issue 36): the grade schemes guidelines use, list
headers, qualifiers that stay with their statement, direction and population."""

import pytest

from medr2.appraise.recommendations import (continued, extract, grade_tag, header_grade, lead_items, parse_grade, population_of,
                                             with_items)


@pytest.mark.parametrize("text, grade, strength", [
    ("Offer statins (Strong recommendation, moderate-quality evidence).",
     "Strong recommendation, moderate-quality evidence", "strong"),
    ("Clinicians may offer CBT (conditional recommendation, low quality of evidence).",
     "conditional recommendation, low quality of evidence", "weak"),
    ("Ascitic fluid should be cultured at the bedside (Class I, Level B).", "Class I, Level B", "strong"),
    ("Anticoagulation is reasonable (Class IIa, Level A).", "Class IIa, Level A", "moderate"),
    ("Routine use is not recommended (Class III, Level C).", "Class III, Level C", "strong"),
    ("Vasectomy is safer than tubal sterilization (Level A).", "Level A", "strong"),
    ("Naftidrofuryl may be considered (Level C).", "Level C", "weak"),
    ("There is Level II evidence for nucleus accumbens DBS.", "Level II", "moderate"),
    ("The Task Force suggests alpha-blockers first. (2|++OO)", "2|++OO", "weak"),
    ("Offer statins to adults with familial hypercholesterolaemia (1 ⊕⊕⊕O).", "1 ⊕⊕⊕O", "strong"),
    ("We suggest against aspirin (conditional recommendation, low certainty of evidence).",
     "conditional recommendation, low certainty of evidence", "weak"),
    ("Statin therapy is indicated (COR 1, LOE A).", "COR 1, LOE A", "strong"),
    ("A statin is reasonable (COR 2a; LOE B-NR).", "COR 2a; LOE B-NR", "moderate"),
    ("Omega-3 is not recommended (COR 3: No Benefit, LOE B-R).", "COR 3: No Benefit, LOE B-R", "moderate"),
    ("Digoxin is potentially harmful (COR 3: Harm, LOE C-LD).", "COR 3: Harm, LOE C-LD", "strong"),
    ("Beta-blockers are recommended to reduce mortality. I A", "I A", "strong"),
    ("Ivabradine should be considered in sinus rhythm. IIb C", "IIb C", "weak"),
    ("Offer naloxone (recommendation category: A; evidence type: 4).", "recommendation category: A", "strong"),
    ("Practice Point 1.2: it is reasonable to continue an SGLT2i.", "Practice Point", "consensus"),
    ("Intranasal corticosteroids are the most potent medications [IA].", "IA", "strong"),
    ("Azelastine offers no benefit over conventional treatment [IIA].", "IIA", "strong"),
    ("Amniocentesis should be offered (II-2B).", "II-2B", "moderate"),
    ("Treat for 10 days to eradicate GAS [D].", "D", "weak"),
    ("We recommend against routine screening (1C).", "1C", "strong"),
    ("The USPSTF concludes that the evidence is insufficient (I statement).", "I statement", "insufficient"),
    ("The panel strongly recommends trauma-focused psychotherapy.", "strongly recommends", "strong"),
    ("Use a cuffed tube (GPP).", "GPP", "consensus"),
])
def test_grade_schemes(text, grade, strength):
    assert parse_grade(text) == (grade, strength)


@pytest.mark.parametrize("text", [
    "On the basis of data from 2 Class I studies, quinine derivatives are effective.",
    "Three Level 1 trials were reviewed.",
    "Metformin should be offered first.",
])
def test_study_classes_and_plain_directives_are_no_grade(text):
    assert parse_grade(text) == (None, None)


def test_a_bullet_keeps_its_qualifiers_and_drops_its_label():
    text = ("Question 2: Is quinine effective?\n"
            " - Conclusion. Quinine derivatives are effective, although the benefit is small.\n"
            " - Recommendation. Although likely effective (Level A), quinine derivatives should be avoided for "
            "routine treatment of cramps. These agents should only be considered when cramps are very disabling. "
            "They should only be used after informing the patient of the side effects.")
    got = extract(text)
    assert len(got) == 1
    s = got[0]
    assert s.statement.startswith("Although likely effective (Level A), quinine derivatives should be avoided")
    assert s.statement.endswith("informing the patient of the side effects.")
    assert (s.grade, s.strength, s.direction, s.firm) == ("Level A", "strong", "against", True)


def test_separate_bullets_are_separate_recommendations_in_order():
    text = "- Offer X to adults (Level B).\n- Avoid Y in pregnancy (Level C).\n- Background on Z."
    got = extract(text)
    assert [(s.grade, s.direction) for s in got] == [("Level B", "for"), ("Level C", "against")]


def test_insufficient_evidence_is_a_finding_without_direction():
    (s,) = extract("Data are insufficient to draw any conclusion on calf stretching (Level U).")
    assert (s.strength, s.direction) == ("insufficient", "neutral")


def test_a_list_inherits_the_grade_of_its_header():
    previous = ["Postpartum hemorrhage.",
                "The following recommendations are based on limited evidence (Level B):",
                "- Misoprostol can be used.",
                "The following are based on consensus and expert opinion (Level C):"]
    assert header_grade(previous) == ("Level C", "weak")
    assert header_grade(previous[:3]) == ("Level B", "moderate")
    assert header_grade(["Background and scope:", "- Offer X."]) == (None, None)


def test_a_header_in_the_passage_is_no_statement_and_grades_the_statements_under_it():
    text = ("The following recommendations are based on good and consistent evidence (Level A):\n"
            "- Women should be offered screening for HIV.\n"
            "- Antibiotics should not be used for viral infection (Level C).\n"
            "The following recommendation is based on consensus and expert opinion (Level C):\n"
            "- Consider a follow-up visit if the person has:\n- fever\n- pain\n"
            "Treatment\n"
            "- Offer oral rehydration to children with diarrhoea.")
    got = [(s.statement[:30], s.grade, s.direction) for s in extract(text)]
    assert got == [("Women should be offered screen", "Level A", "for"),
                   ("Antibiotics should not be used", "Level C", "against"),  # its own grade stands
                   ("Consider a follow-up visit if ", "Level C", "for"),  # a list under the second header
                   ("Offer oral rehydration to chil", None, "for")]  # a new heading: no header in force


def test_population():
    assert population_of("For adult patients with PTSD, the panel suggests CBT.") == "adult patients with PTSD"
    assert population_of("Women who breastfeed may use warfarin.") is None or \
        population_of("Women who breastfeed may use warfarin.").startswith("Women")
    assert population_of("Metformin should be offered.") is None


def test_ungraded_wording_ranks_firm_above_conditional():
    firm, may = extract("Patients should receive X.\nY may be considered.")
    assert firm.rank > may.rank and firm.grade is None and may.grade is None
    graded = extract("Z may be considered (Level A).")[0]
    assert graded.rank > firm.rank


def test_nice_style_imperatives_with_a_trailing_grade_sentence():
    text = ("2.4 Stop metformin when the eGFR falls below 30, and do not start it below 45 unless the benefit "
            "outweighs the risk. (Strong recommendation; evidence level B)")
    (s,) = extract(text)
    assert s.statement.startswith("Stop metformin") and s.statement.endswith("(Strong recommendation; evidence level B)")
    assert (s.grade, s.strength, s.firm) == ("Strong recommendation; evidence level B", "strong", True)
    (c,) = extract("Consider a GLP-1 receptor agonist when more glucose lowering is needed.")
    assert c.grade is None and not c.firm


def test_grade_definitions_methods_and_fragments_are_not_recommendations():
    from medr2.appraise.recommendations import advice_section

    for text in ["Level A = Established as effective for the given condition (requires two Class I studies).",
                 "Grade B: fair evidence that the service improves outcomes; it should be offered.",
                 "(Level A rating requires at least two consistent Class I studies.)",
                 "Informal Consensus", "There is fair evidence to recommend the clinical preventive action"]:
        assert extract(text) == [], text
    (s,) = extract("Grade A: offer metformin to adults with type 2 diabetes.")
    assert s.statement.startswith("Grade A: offer metformin")
    (t,) = extract("- Diltiazem may be considered (Level C). Definitions: Level C = possibly effective.")
    assert t.statement == "Diltiazem may be considered (Level C)."
    assert advice_section(["Recommendations", "Major Recommendations"]) and advice_section(["Contraindications"])
    assert not advice_section(["Methodology", "Rating Scheme for the Strength of the Recommendations"])
    assert not advice_section(["Benefits/Harms of Implementing the Guideline Recommendations", "Potential Harms"])


def test_descriptions_of_practice_and_justifications_are_not_recommendations():
    assert extract("Vitamin D and calcium supplementation are often recommended for postmenopausal women.") == []
    assert extract("Justification: There is no direct evidence that screening is effective here.") == []
    (s,) = extract("Statins are widely used, and should be offered to adults at high risk (Grade A).")
    assert s.grade == "Grade A"


def test_a_list_lead_in_keeps_its_items():
    """A recommendation that introduces a list ("... if the person has:") is quoted with its items;
    a recommendation after the list is a statement of its own, not the last item's continuation."""
    got = extract("Consider resting echocardiography if the person has:\n- a heart murmur, or\n"
                  "- signs of heart failure\nDo not offer nitrates routinely.")
    assert [s.statement for s in got] == [
        "Consider resting echocardiography if the person has: a heart murmur; signs of heart failure.",
        "Do not offer nitrates routinely."]


def test_each_action_of_a_list_is_a_recommendation_under_its_condition():
    """Items that are actions ("If stable (II-D): - Consider other diagnoses.") are recommendations
    each, read under the lead-in: its grade unless they carry their own, their own direction; a
    second lead-in after the list opens a list of its own."""
    got = extract("If hemodynamically stable, with no positive findings (II-D):\n - Consider other diagnoses.\n"
                  " - Do not repeat imaging before 2 weeks (III-B).")
    assert [(s.statement, s.grade, s.direction) for s in got] == [
        ("If hemodynamically stable, with no positive findings (II-D): Consider other diagnoses.", "II-D", "for"),
        ("If hemodynamically stable, with no positive findings (II-D): Do not repeat imaging before 2 weeks (III-B).",
         "III-B", "against")]
    got = extract("We recommend:\n- Offer aspirin (Grade A)\n- Do not offer warfarin (Grade D)")
    assert [(s.grade, s.direction) for s in got] == [("Grade A", "for"), ("Grade D", "against")]
    a, b, c = extract("If imaging shows an abscess (I-C):\n- Give antibiotics now.\n"
                      "- Obtain a neurosurgical consult.\nIf imaging shows osteomyelitis (I-C):\n"
                      "- Hold antibiotics until the biopsy.")
    assert [a.statement, b.statement, c.statement] == [
        "If imaging shows an abscess (I-C): Give antibiotics now.",
        "If imaging shows an abscess (I-C): Obtain a neurosurgical consult.",
        "If imaging shows osteomyelitis (I-C): Hold antibiotics until the biopsy."]


def test_a_list_of_conditions_is_one_statement_with_the_lead_ins_grade_and_direction():
    """A grade written on the last condition grades the list; the direction is the lead-in's; a
    recommendation after the list, a prose sentence or a header of recommendations is no item."""
    got = extract("- Women who do not wish to conceive should be offered EC after:\n- unprotected intercourse\n"
                  "- sexual assault (Grade B)\n- Offer LNG within 72 hours (Grade A).")
    assert [(s.statement, s.grade, s.direction) for s in got] == [
        ("Women who do not wish to conceive should be offered EC after: unprotected intercourse; sexual assault "
         "(Grade B).", "Grade B", "for"), ("Offer LNG within 72 hours (Grade A).", "Grade A", "for")]
    (s,) = extract("Do not prescribe antibiotics to children who have:\n- a cold\n- a sore throat without fever")
    assert s.direction == "against" and s.statement.endswith("have: a cold; a sore throat without fever.")
    got = extract("Refer urgently if the person has:\nchest pain\nsyncope\n"
                  "The committee noted that most people had no symptoms.")
    assert got[0].statement == "Refer urgently if the person has: chest pain; syncope."
    got = extract("Consider echocardiography if the person has:\n- a heart murmur\n- chest pain\n"
                  "Patients should be referred urgently.")
    assert [s.statement for s in got] == ["Consider echocardiography if the person has: a heart murmur; chest pain.",
                                          "Patients should be referred urgently."]
    got = extract("The following recommendations are based on limited evidence (Level B):\n"
                  "- Offer metformin as first-line therapy.\n- Consider an SGLT2 inhibitor in kidney disease.")
    assert [s.statement for s in got][-2:] == ["Offer metformin as first-line therapy.",
                                               "Consider an SGLT2 inhibitor in kidney disease."]


def test_a_long_list_says_that_items_were_left_out():
    text = "Consider referral if the person has:\n" + "\n".join(f"- finding {i}" for i in range(15))
    (s,) = extract(text)
    assert s.statement.endswith("finding 11; ...") and "finding 12" not in s.statement and not s.open_list


def test_a_list_cut_from_its_lead_in_is_read_from_the_next_passages():
    """Segmentation may end a passage at the lead-in and put each item in a passage of its own:
    the items are read on while a whole passage is items of the list's kind (bullets only)."""
    items, used, cut = lead_items(["- a heart murmur", " - signs of heart failure\nOffer an ECG before the echo.",
                              "- chest pain"])
    assert (items, used, cut) == (["a heart murmur", "signs of heart failure"], 2, False)
    assert lead_items(["Before ordering the echocardiogram, carry out an ECG."]) == ([], 0, False)
    lead = extract("Consider resting echocardiography if the person has:")[0]
    s = continued(lead, items, ["p2", "p3"])
    assert s.statement.endswith("has: a heart murmur; signs of heart failure.") and s.continued_in == ["p2", "p3"]
    assert with_items("Use these scores:", []) == "Use these scores:"


@pytest.mark.parametrize("text, grade, strength", [
    ("Treat latent infection before starting biologics (BIII).", "BIII", "moderate"),
    ("repeat the smear in 3 years is acceptable (biii).", "biii", "moderate"),
    ("Give the vaccine before travel (A-II).", "A-II", "strong"),
    ("Offer a cuffed tube (Strength of Recommendation: Strong For).", "Strength of Recommendation: Strong For", "strong"),
    ("Based on consensus, the panel recommends a repeat scan.", "Based on consensus", "consensus"),
    ("Offer a written plan (Consensus).", "Consensus", "consensus"),
])
def test_more_grade_schemes(text, grade, strength):
    assert parse_grade(text) == (grade, strength)


@pytest.mark.parametrize("text", [
    "The committee made a recommendation for research on follow-up.",  # "a recommendation" is no grade A
    "Manage the result according to the 2019 consensus guidelines.",
    "Consensus was not reached for patients on high-dose steroids.",
    "The panel used a formal consensus process for this question.",
    "The analysis included all grade 3 and 4 events.",
    "Grade 3 or higher neutropenia occurred in 12%.",
    "Severe obesity is defined as class III obesity.",
])
def test_mentions_of_grades_and_consensus_are_no_grade(text):
    assert parse_grade(text) == (None, None)


@pytest.mark.parametrize("text", [
    "The ERG considered that the trials were well conducted and should be generalisable.",
    "The committee agreed that people should be offered a choice of treatment.",
    "It considered the drug to be the most widely used one in the UK.",
    "The committee made a recommendation for research on models of care.",
    "The manufacturer stated that the trial tested the drug at its recommended dose.",
    "Recommended antibiotics are available as generic formulations.",
    "NICE's guideline on asthma recommends that people should have a written plan.",
    "Which patients should be screened for fatty liver? No consensus exists.",
    "These findings suggest improved activity for the combination over placebo.",
    "Refer to the full text of the original guideline for the screening procedures.",
])
def test_reported_discussion_cited_advice_and_pointers_are_not_recommendations(text):
    assert extract(text) == [], text


def test_imperatives_of_procedure_guidance_and_conditional_imperatives_are_recommendations():
    text = ("Clinicians wishing to undertake the procedure should take the following actions.\n"
            "Inform the clinical governance leads in their Trusts.\n"
            "Audit and review clinical outcomes of all patients having the procedure.\n"
            "If the test is positive, manage using the local thresholds.\n"
            "Ensure that patients understand that other treatments are available.")
    got = {s.statement: s.direction for s in extract(text)}
    assert got["Inform the clinical governance leads in their Trusts."] == "for"
    assert got["Audit and review clinical outcomes of all patients having the procedure."] == "for"
    assert got["If the test is positive, manage using the local thresholds."] == "for"
    assert got["Ensure that patients understand that other treatments are available."] == "for"


def test_encouraged_and_method_of_choice_are_recommendations_for():
    (a,) = extract("Clinicians are encouraged to collect long-term outcome data.")
    (b,) = extract("Cine imaging with bSSFP is the method of choice at 1.5 T.")
    assert a.direction == b.direction == "for"
    (c,) = extract("Stop phototherapy once bilirubin is 3 mg/dL below the threshold.")
    assert c.direction == "neutral"  # when to stop, not a recommendation against


def test_a_pointer_to_another_section_is_no_recommendation_but_a_referral_is():
    assert extract("For more details, refer to the 'Sources of evidence' section.") == []
    (s,) = extract("Refer people with red-flag symptoms to a specialist urgently.")
    assert s.direction == "for"


def test_an_imperative_with_to_avoid_is_still_a_recommendation():
    # "to avoid" alone is read as purpose ("in order to avoid toxicity"), so the verb must carry it
    (s,) = extract("Counsel patients to avoid alcohol during treatment.")
    assert s.direction == "against"
    assert extract("In order to avoid severe toxicity, one risks progression with low doses.") == []


@pytest.mark.parametrize("text, direction", [
    ("No recommendation can be made for or against routine screening.", "neutral"),
    ("The USPSTF makes no recommendation for or against routine screening.", "neutral"),
    ("The dose may be reduced to 5 mg daily in older adults.", "neutral"),
    ("Follow-up may be undertaken in primary care.", "neutral"),
    ("Calcium supplementation is not encouraged in pregnancy.", "against"),
    ("Ulipristal is not suitable for women with severe asthma.", "against"),
    ("It is important to avoid NSAIDs in renal impairment.", "against"),
    ("Offer a cuffed tube (Strength of Recommendation: Weak Against).", "against"),
    ("Aspirin is the recommended treatment for adults at high risk.", "for"),
    ("The recommended dose of vitamin D is 800 IU daily for adults over 65.", "for"),
    ("As NICE's guideline on hypertension recommends, measure blood pressure in both arms.", "for"),
    ("This 2021 guideline for hypertension recommends a target below 130/80 mmHg.", "for"),
    ("Ask the person 'Do you smoke?' and record the answer.", "for"),
    ("For malignancy, start with reduced doses.", "for"),
    ("If bleeding occurs, discontinue anticoagulation.", "neutral"),
])
def test_advice_the_stricter_rules_must_keep(text, direction):
    (s,) = extract(text)
    assert s.direction == direction, text


def test_a_reported_sentence_after_a_recommendation_does_not_drop_it():
    (s,) = extract("Offer statins to adults with CVD. The committee noted that adherence is low.")
    assert s.statement.startswith("Offer statins")
    (t,) = extract("Clinicians should ask patients whether they understood the information given.")
    assert t.direction == "for"


@pytest.mark.parametrize("text", [
    "Mild prolapse may be the most important problem in older women.",  # "may be" + a description
    "Surgery may be possible for a minority of these patients.",
    "Further research is required to establish the best dose.",
    "A recommendation for research has been made on follow-up imaging.",
    "In the placebo group, use of rescue medication was higher.",
    "Support for this approach comes from two randomised trials.",
    "Disagreements were resolved by consensus.",
])
def test_descriptions_that_look_like_advice_are_not_recommendations(text):
    assert extract(text) == [], text


def test_a_letter_plus_class_tag_that_spells_the_words_before_it_is_an_abbreviation():
    assert parse_grade("Consider tools that use artificial intelligence (AI).") == (None, None)
    assert parse_grade("Give the vaccine before travel (AI).") == ("AI", "strong")


@pytest.mark.parametrize("text, direction", [
    ("Test for HIV in all people presenting with tuberculosis.", "for"),
    ("If the person has symptoms, test for hepatitis C.", "for"),
    ("If metformin is not appropriate, offer a DPP-4 inhibitor.", "for"),  # "not appropriate" is the condition
    ("Patients for whom warfarin is not suitable should be offered a DOAC.", "for"),
    ("We suggest against routine testing (2|⊕OOO).", "against"),
    ("Clopidogrel may be considered in patients intolerant of aspirin (Class IIb).", "for"),
    ("Further research is needed; until then, clinicians should avoid combination therapy.", "against"),
    ("Titrate the dose every 2 weeks.", "for"),
])
def test_second_review_reproducers(text, direction):
    (s,) = extract(text)
    assert s.direction == direction, text


@pytest.mark.parametrize("text", [
    "Symptoms may be mild or absent in older adults.",
    "This guideline contains no recommendations on the management of pregnancy.",
    "For this reason the committee concluded that the drug could not be recommended.",
    "In the UK, NICE's guideline on hypertension recommends ambulatory monitoring.",
    "Increase in mortality was seen in the treated group.",
])
def test_second_review_non_advice(text):
    assert extract(text) == [], text


def test_a_condition_list_item_with_may_be_stays_an_item():
    (s,) = extract("Refer urgently if the person has:\n- chest pain that may be cardiac in origin\n- a new murmur\n"
                   "- breathlessness")
    assert s.direction == "for" and len(s.items) == 3


def test_grade_tags_after_function_words_are_grades_not_abbreviations():
    assert parse_grade("Start prophylaxis before induction (BI).") == ("BI", "moderate")
    assert parse_grade("ART is recommended for all infants (AI).") == ("AI", "strong")
    assert parse_grade("Offer a follow-up call within 48 hours (by consensus).") == ("by consensus", "consensus")


@pytest.mark.parametrize("text, grade, strength, direction", [
    # NAMS: the grade in brackets after the sentence's full stop
    ("- First-line therapies for symptomatic vulvovaginal atrophy include nonhormonal lubricants with "
     "intercourse. [Level A]", "Level A", "strong", "neutral"),
    # AAOS: the strength on a line of its own wording, after a sentence without advice wording
    ("Moderate evidence supports MRI as the advanced imaging of choice for occult hip fracture. "
     "Strength of Recommendation: Moderate ***", "Strength of Recommendation: Moderate", "moderate", "for"),
    ("Moderate evidence does not support routine preoperative traction for hip fracture. "
     "Strength of Recommendation: Moderate ***", "Strength of Recommendation: Moderate", "moderate", "against"),
])
def test_a_trailing_grade_grades_the_sentence_before_it(text, grade, strength, direction):
    (s,) = extract(text)
    assert (s.grade, s.strength, s.direction) == (grade, strength, direction)
    assert s.statement.split(".")[0] in text  # the sentence, not the grade alone


def test_a_grade_tag_alone_is_not_a_statement():
    assert grade_tag("[Level A]") and grade_tag("(Strong recommendation; level B)")
    assert not grade_tag("Offer X (Level A).") and not grade_tag("(see Table 3)")
    assert extract("Strength of Recommendation: Strong ****") == []


def test_a_grade_line_between_bullets_heads_the_bullets_below_it():
    text = ("- Antibiotics should be stopped after 24 hours.\nLevel 2\n"
            "- Patients should receive a single dose of cefazolin before incision.")
    first, second = extract(text)
    assert first.grade is None and second.grade == "Level 2"
    assert header_grade(["- Offer X.\nLevel 3"]) == ("Level 3", "weak")
    assert header_grade(["- Offer X.\n(Level 3)"]) == (None, None)  # the grade of the line above


@pytest.mark.parametrize("text", [
    "Offer statins to adults with a 10-year risk above 10%.\n(Level A)\nOffer ezetimibe to adults intolerant of statins.",
    "- Offer statins to adults with a 10-year risk above 10%.\n(Level A)\n- Offer ezetimibe to adults intolerant of statins.",
    "- First-line lipid therapy for adults at high risk includes statins.\n[Level A]\n"
    "- Offer ezetimibe to adults intolerant of statins.",
])
def test_a_grade_on_its_own_line_after_a_statement_grades_that_statement(text):
    first, second = extract(text)
    assert first.grade == "Level A" and second.grade is None


def test_a_list_grade_line_closes_the_list_without_becoming_an_item():
    (s,) = extract("The panel suggests that clinicians offer one of the following:\n- Fluoxetine\n- Sertraline\n"
                   "(Strength of Recommendation: Conditional)")
    assert s.statement.endswith("Fluoxetine; Sertraline (Strength of Recommendation: Conditional).")
    assert s.strength == "weak"


@pytest.mark.parametrize("text, direction", [
    ("Discourage discontinuation of breastfeeding in suspected breast-milk jaundice.", "against"),
    ("If hemodynamically stable, hold antibiotics until after biopsy.", "for"),
])
def test_more_imperatives(text, direction):
    (s,) = extract(text)
    assert s.direction == direction


@pytest.mark.parametrize("row, statement, grade, strength, direction", [
    # ACC/AHA recommendation tables: class of recommendation and level of evidence before the text
    ("1 A In adults 40 to 75 years of age with diabetes, moderate-intensity statin therapy is indicated.",
     "In adults 40 to 75 years of age with diabetes, moderate-intensity statin therapy is indicated.",
     "COR 1, LOE A", "strong", "for"),
    ("2b C-LD In selected patients with HFpEF, spironolactone might be considered.",
     "In selected patients with HFpEF, spironolactone might be considered.", "COR 2b, LOE C-LD", "weak", "for"),
    ("3: Harm B-R In patients with AF, digoxin as first-line rate control is potentially harmful.",
     "In patients with AF, digoxin as first-line rate control is potentially harmful.",
     "COR 3: Harm, LOE B-R", "strong", "against"),
    ("3: No Benefit B-R In patients with HFrEF, omega-3 supplementation does not reduce events.",
     "In patients with HFrEF, omega-3 supplementation does not reduce events.",
     "COR 3: No Benefit, LOE B-R", "moderate", "against"),
    # SIGN: the grade letter, or a tick for a good practice point, before the text
    ("B NSAIDs should be considered for short-term relief of pain.",
     "NSAIDs should be considered for short-term relief of pain.", "Grade B", "moderate", "for"),
    ("A Patients with acute low back pain should be advised to stay active.",
     "Patients with acute low back pain should be advised to stay active.", "Grade A", "strong", "for"),
    ("✓ Healthcare professionals should reassure patients that the prognosis is good.",
     "Healthcare professionals should reassure patients that the prognosis is good.",
     "good practice point", "consensus", "for"),
])
def test_a_table_rows_leading_grade_grades_its_statement(row, statement, grade, strength, direction):
    (s,) = extract(row)
    assert s.statement.startswith(statement)
    assert (s.grade, s.strength, s.direction) == (grade, strength, direction)


@pytest.mark.parametrize("row", [
    "A CT scan should be obtained within one hour of arrival.",  # the article, not grade A
    "A Doppler study should be done when a DVT is suspected.",
    "1 A patient with chest pain should have an ECG within 10 minutes.",  # a numbered line
])
def test_an_article_or_a_number_is_no_leading_grade(row):
    (s,) = extract(row)
    assert s.statement == row and s.grade is None
