"""The relation schema of the clinical knowledge graph: entity types, relations with their
domain, range, direction and polarity, which relations contradict each other, and the cue
patterns the deterministic extractor reads them from (English and Chinese).

Stored triples always use the canonical direction: "hypertension is treated with lisinopril"
becomes (lisinopril, treats, hypertension). Negated statements keep their own relation
(``not_treats``): polarity differences are never merged.

Example::

    >>> from medr2.kg.relations import RELATIONS, conflicting, type_satisfies
    >>> RELATIONS["treats"].domain
    ('Intervention', 'Substance')
    >>> conflicting("treats", "contraindicated_in"), conflicting("treats", "prevents")
    (True, False)
    >>> type_satisfies("Drug", ("Intervention",))
    True
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

# Entity types; a type satisfies a constraint naming it or one of its ancestors.
TYPE_PARENT: dict[str, str] = {
    "Drug": "Intervention", "Procedure": "Intervention", "Test": "Intervention", "Therapy": "Intervention",
    "Disease": "Condition", "Symptom": "Condition", "Syndrome": "Condition",
    "Chemical": "Substance", "Food": "Substance",
}
ENTITY_TYPES = sorted(set(TYPE_PARENT) | set(TYPE_PARENT.values()) | {
    "Population", "Anatomy", "Organism", "Outcome", "Dose", "Department", "Exposure", "Guideline", "Other"})
ANY = ("Any",)


def ancestors(t: str) -> list[str]:
    out = [t]
    while out[-1] in TYPE_PARENT:
        out.append(TYPE_PARENT[out[-1]])
    return out


def type_satisfies(t: Optional[str], allowed: tuple[str, ...] | list[str]) -> Optional[bool]:
    """True / False when the type is known, None when it is unknown (no type, or "Other")."""
    if not allowed or "Any" in allowed:
        return True
    if not t or t == "Other":
        return None
    return any(a in allowed for a in ancestors(t))


@dataclass(frozen=True)
class Relation:
    name: str
    domain: tuple[str, ...] = ANY
    range: tuple[str, ...] = ANY
    symmetric: bool = False
    inverse: str = ""  # surface name of the reversed reading ("treated_by")
    polarity: int = 1
    description: str = ""


def _r(name, domain, range_, inverse="", symmetric=False, description="") -> list[Relation]:
    pos = Relation(name, tuple(domain), tuple(range_), symmetric, inverse, 1, description)
    neg = Relation("not_" + name, tuple(domain), tuple(range_), symmetric, "", -1, "negated: " + description)
    return [pos, neg]


_COND = ("Condition",)
_INT = ("Intervention", "Substance")
RELATIONS: dict[str, Relation] = {r.name: r for r in [
    *_r("treats", _INT, _COND, "treated_by", description="an intervention treats or improves a condition"),
    *_r("indicated_for", _INT, ("Condition", "Population"), description="an intervention is indicated for"),
    *_r("contraindicated_in", _INT, ("Condition", "Population", "Substance"),
        description="an intervention must not be used in"),
    *_r("causes", ANY, ("Condition",), "caused_by", description="an agent or condition causes a condition"),
    *_r("risk_factor_for", ANY, ("Condition",), description="increases the risk of a condition"),
    *_r("diagnosed_by", ("Condition",), ("Test", "Procedure"), "diagnoses",
        description="a condition is diagnosed, detected or screened by a test"),
    *_r("symptom_of", ("Condition",), ("Condition",), "has_symptom", description="a sign or symptom of a condition"),
    *_r("prevents", _INT, _COND, "prevented_by", description="an intervention prevents a condition"),
    *_r("interacts_with", ("Drug", "Chemical", "Food"), ("Drug", "Chemical", "Food"), symmetric=True,
        description="a drug interaction"),
    *_r("dose_of", ("Dose",), ("Drug", "Chemical"), "has_dose", description="a dose or regimen of a drug"),
    *_r("recommended_for", ("Intervention", "Substance", "Other"), ("Condition", "Population"),
        description="a guideline recommends the intervention for"),
    Relation("considered_for", ("Intervention", "Substance", "Other"), ("Condition",), description=
             "a guideline considers the intervention for the condition (scope)"),
    Relation("in_population", ("Condition",), ("Population",), description="a guideline's target population"),
    Relation("outcome_considered", ("Condition",), ("Outcome",), description="an outcome a guideline considers"),
]}

# Pairs that contradict when they join the same head and tail (beyond r vs not_r).
CONFLICT_PAIRS: set[frozenset[str]] = {frozenset(p) for p in [
    ("treats", "contraindicated_in"), ("indicated_for", "contraindicated_in"),
    ("recommended_for", "contraindicated_in"), ("recommended_for", "not_recommended_for"),
    ("indicated_for", "not_recommended_for"), ("prevents", "causes"), ("treats", "causes"),
]}


def base_name(rel: str) -> str:
    return rel[4:] if rel.startswith("not_") else rel


def polarity(rel: str) -> int:
    r = RELATIONS.get(rel)
    return r.polarity if r else (-1 if rel.startswith("not_") else 1)


def conflicting(a: str, b: str) -> bool:
    """Whether two relations between the same head and tail contradict each other."""
    if a == b:
        return False
    if base_name(a) == base_name(b):  # r vs not_r
        return True
    return frozenset((a, b)) in CONFLICT_PAIRS


# --- cue patterns -------------------------------------------------------------------------------
# Each cue is read from the text between two entity mentions A ... B of one sentence (other
# mentions there are replaced by "ENT" and leading/trailing coordination is removed first).
# "fwd": A rel B; "rev": B rel A.
_BE = r"(?:is|are|was|were|be|been|being|has been|have been|can be|may be|should be|must be|could be|might be)"
_MOD = r"(?:(?:also|often|commonly|usually|frequently|generally|effectively|safely|successfully|first-line|initially)\s+)?"
_PAT = r"(?:(?:in|for|among|of)\s+)?(?:(?:adult|elderly|older|pediatric|paediatric|pregnant)\s+)?(?:patients|people|persons|adults|children|women|men|individuals|those|subjects)\s+(?:with|who have|having|suffering from)\s+"
_OPT_PAT = rf"(?:{_PAT})?"


@dataclass(frozen=True)
class Cue:
    relation: str
    direction: str  # "fwd" or "rev"
    pattern: re.Pattern = field(compare=False)


def _cue(rel: str, direction: str, pattern: str) -> Cue:
    return Cue(rel, direction, re.compile(r"^\s*(?:" + pattern + r")\s*$", re.IGNORECASE))


EN_CUES: list[Cue] = [
    # treats
    _cue("recommended_for", "fwd", rf"(?:{_BE}\s+)?{_MOD}(?:recommended|suggested|offered|advised|preferred)\s+(?:as\s+(?:first-line\s+)?(?:treatment|therapy)\s+)?(?:to|for|in)\s+(?:the\s+)?(?:treatment of\s+|management of\s+)?{_OPT_PAT}"),
    _cue("treats", "fwd", rf"(?:{_BE}\s+)?{_MOD}(?:used|given|prescribed|administered|effective|efficacious|beneficial|indicated|approved)\s+(?:to treat|for the treatment of|in the treatment of|for treating|for the management of|in the management of)\s+(?:the\s+)?{_OPT_PAT}"),
    _cue("treats", "fwd", rf"(?:{_BE}\s+)?{_MOD}(?:effective|efficacious|beneficial|approved)\s+(?:for|in|against)\s+(?:the\s+)?{_OPT_PAT}"),
    _cue("treats", "fwd", rf"(?:{_BE}\s+)?{_MOD}(?:an?|the)?\s*(?:effective|standard|first-line|preferred|recommended|established|main|primary|mainstay of)?\s*(?:treatment|therapy|drug|agent|medication|option|choice)s?\s+(?:of choice\s+)?(?:for|of|in)\s+(?:the\s+)?{_OPT_PAT}"),
    _cue("treats", "fwd", rf"{_MOD}(?:treats?|treated|cures?|cured|improves?|improved|relieves?|relieved|alleviates?|ameliorates?|reduces? symptoms of|controls?|manages?|resolves?)\s+(?:the\s+)?(?:symptoms of\s+)?{_OPT_PAT}"),
    _cue("treats", "rev", rf"(?:{_BE}\s+)?{_MOD}(?:treated|managed|controlled|relieved|improved|cured)\s+(?:with|by|using|through)\s+(?:an?\s+|the\s+)?(?:\w+\s+)?"),
    _cue("treats", "rev", r"(?:treatment|therapy|management)\s+(?:includes?|consists of|involves?|is|with)\s+(?:an?\s+|the\s+)?"),
    _cue("treats", "rev", rf"(?:{_BE}\s+)?(?:responds?|responsive|respond)\s+(?:well\s+)?to\s+"),
    # indicated_for
    _cue("indicated_for", "fwd", rf"(?:{_BE}\s+)?{_MOD}(?:indicated|warranted|appropriate|suitable)\s+(?:for|in)\s+(?:the\s+)?{_OPT_PAT}"),
    # contraindicated_in
    _cue("contraindicated_in", "fwd", rf"(?:{_BE}\s+)?{_MOD}(?:contraindicated|contra-indicated|unsafe|dangerous|avoided|harmful)\s+(?:in|for|during|with)\s+(?:the\s+)?{_OPT_PAT}"),
    _cue("contraindicated_in", "fwd", rf"(?:should|must)\s+(?:not|never)\s+be\s+(?:used|given|prescribed|administered|combined)\s+(?:in|for|to|with|during)\s+(?:the\s+)?{_OPT_PAT}"),
    _cue("contraindicated_in", "rev", r"(?:is|are)\s+(?:a\s+)?contraindications?\s+(?:to|for)\s+(?:the use of\s+)?"),
    # causes
    _cue("causes", "fwd", rf"(?:{_BE}\s+)?{_MOD}(?:causes?|caused|leads? to|led to|results? in|resulted in|induces?|induced|triggers?|triggered|produces?|provokes?)\s+(?:the\s+)?(?:development of\s+)?"),
    _cue("causes", "fwd", rf"(?:{_BE}\s+)?(?:an?|the)?\s*(?:common|major|main|leading|frequent|known|rare|possible)?\s*(?:cause|causes|etiology|aetiology)\s+of\s+"),
    _cue("causes", "rev", rf"(?:{_BE}\s+)?{_MOD}(?:caused|induced|triggered|provoked)\s+by\s+(?:an?\s+|the\s+)?"),
    _cue("causes", "rev", r"(?:is|are)?\s*(?:due to|secondary to|attributable to|resulting from|caused by)\s+(?:an?\s+|the\s+)?"),
    # risk_factor_for
    _cue("risk_factor_for", "fwd", rf"(?:{_BE}\s+)?(?:an?|the)?\s*(?:major|important|independent|known|strong|significant)?\s*(?:risk factor|predisposing factor|predictor)s?\s+(?:for|of)\s+(?:developing\s+)?"),
    _cue("risk_factor_for", "fwd", rf"(?:{_BE}\s+)?(?:increases?|increased|raises?|raised|doubles?|elevates?)\s+(?:the\s+)?(?:risk|likelihood|incidence|odds)\s+(?:of|for)\s+(?:developing\s+)?"),
    _cue("risk_factor_for", "fwd", rf"(?:{_BE}\s+)?(?:associated with an increased risk of|associated with a higher risk of|predisposes? (?:patients\s+)?to)\s+"),
    # diagnosed_by
    _cue("diagnosed_by", "fwd", rf"(?:{_BE}\s+)?{_MOD}(?:diagnosed|detected|confirmed|identified|screened|assessed|evaluated|excluded|ruled out)\s+(?:with|by|using|through|on|via)\s+(?:an?\s+|the\s+)?"),
    _cue("diagnosed_by", "rev", rf"(?:{_BE}\s+)?{_MOD}(?:used|recommended|performed|useful|indicated)?\s*(?:to|for)\s+(?:diagnose|detect|confirm|screen for|identify|rule out|exclude|diagnosing|detecting|screening for|the diagnosis of|the detection of|screening of|the evaluation of)\s+(?:the\s+)?{_OPT_PAT}"),
    _cue("diagnosed_by", "rev", rf"(?:{_BE}\s+)?(?:diagnoses|detects|confirms|screens for)\s+"),
    # symptom_of
    _cue("symptom_of", "fwd", rf"(?:{_BE}\s+)?(?:an?|the)?\s*(?:common|typical|classic|early|main|cardinal|frequent|presenting|major)?\s*(?:symptom|sign|feature|manifestation|complaint|finding)s?\s+of\s+"),
    _cue("symptom_of", "rev", rf"(?:{_BE}\s+)?(?:typically|often|usually|commonly)?\s*(?:presents?|presented|manifests?|manifested)\s+(?:with|as)\s+"),
    _cue("symptom_of", "rev", r"(?:symptoms|signs|features|manifestations)\s+(?:include|includes|including|are|such as)\s+"),
    _cue("symptom_of", "rev", rf"(?:patients\s+)?(?:may|often|usually|typically|commonly)?\s*(?:causes?|produces?|leads? to)\s+symptoms?\s+(?:such as|like|of)\s+"),
    # prevents
    _cue("prevents", "fwd", rf"(?:{_BE}\s+)?{_MOD}(?:prevents?|prevented|reduces? the risk of|reduced the risk of|lowers? the risk of|protects? against|decreases? the (?:risk|incidence) of|is used to prevent|are used to prevent|(?:used|recommended|given|indicated|effective) (?:for|in) (?:the )?prevention of|(?:used|recommended|given) to prevent)\s+(?:the\s+)?"),
    _cue("prevents", "rev", rf"(?:{_BE}\s+)?{_MOD}(?:prevented|avoided)\s+(?:with|by|through)\s+(?:an?\s+|the\s+)?"),
    _cue("prevents", "rev", r"(?:prevention|prophylaxis)\s+(?:includes?|with|is|by)\s+"),
    # interacts_with
    _cue("interacts_with", "fwd", rf"(?:{_BE}\s+)?(?:interacts?|interacted|interaction)\s+with\s+"),
    _cue("interacts_with", "fwd", r"(?:and|with)\s+(?:may\s+)?(?:interact|interacts)"),
    _cue("interacts_with", "fwd", r"(?:increases?|decreases?|raises?|lowers?|potentiates?|inhibits?)\s+(?:the\s+)?(?:levels?|concentrations?|effects?|metabolism|clearance)\s+of\s+"),
]
# Appears before A (B ... "treatment of A with B" style readings are too loose; not used).

NEGATION = re.compile(r"\b(?:not|no|never|neither|nor|without|cannot|can't|don't|doesn't|didn't|isn't|aren't|"
                      r"wasn't|weren't|ineffective|failed to|fails to|did not|does not|do not|unlikely to|"
                      r"no evidence|insufficient evidence|lack of evidence)\b", re.IGNORECASE)
# Negation cues that belong to a cue pattern itself and do not flip it.
NEGATION_PART_OF = {"contraindicated_in"}

ZH_CUES: list[tuple[str, str, re.Pattern]] = [
    (rel, d, re.compile(p)) for rel, d, p in [
        ("contraindicated_in", "fwd", r"^(?:应)?(?:禁用于|禁忌于|禁止用于|慎用于|禁用在)(?:患者)?$"),
        ("treats", "fwd", r"^(?:可|能|可以|主要|常|常用|多|用于|适用于|可用于)*(?:治疗|主治|治|缓解|改善|医治)(?:患者)?$"),
        ("treats", "rev", r"^(?:可|应|宜|常|多)?(?:用|采用|使用|选用|服用|给予)$"),
        ("treats", "rev", r"^(?:的)?(?:治疗|治法)(?:方法|药物)?(?:包括|有|为|是|以|可用|首选)$"),
        ("indicated_for", "fwd", r"^(?:适用于|用于)(?:患者)?$"),
        ("causes", "fwd", r"^(?:可|会|能|可能|易|常)?(?:引起|导致|诱发|造成|引发|致)$"),
        ("causes", "rev", r"^(?:是)?(?:由|因)(?:于)?$"),
        ("prevents", "fwd", r"^(?:可|能|可以|用于)?(?:预防|防止|防治)$"),
        ("symptom_of", "rev", r"^(?:的)?(?:主要|常见|典型)?(?:症状|表现|临床表现)(?:有|为|包括|是)$"),
        ("symptom_of", "rev", r"^(?:常|多|可)?(?:表现为|症见|出现|伴有|伴)$"),
        ("diagnosed_by", "fwd", r"^(?:可|应|需)?(?:通过|经|依靠|借助)?(?:的)?(?:诊断|确诊)(?:依靠|依赖|需要|需|可用|主要靠)$"),
    ]
]
# "A 是 B 的危险因素" / "A 是 B 的症状" / "A 与 B 相互作用": a short link between the mentions and a
# suffix after B that names the relation.
ZH_LINK_IS = re.compile(r"^(?:是|为|是一种|属于|可作为)$")
ZH_LINK_AND = re.compile(r"^(?:与|和|同|跟)$")
ZH_SUFFIX: dict[str, re.Pattern] = {
    "risk_factor_for": re.compile(r"^的(?:危险因素|诱因|高危因素)"),
    "symptom_of": re.compile(r"^的(?:症状|表现|体征)"),
    "interacts_with": re.compile(r"^(?:有|存在|发生)?相互作用"),
}
ZH_NEGATION = re.compile(r"不|未|无效|并非|无法|没有")
