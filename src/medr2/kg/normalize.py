"""Normalisation against the schema: relation surfaces to schema relations (five levels), and
the schema parts induced from the data: relation synonyms ranked by co-occurrence, Jaccard
similarity of argument pairs and substring containment; domain/range constraints; inverse
relation pairs. Surface variants may merge; a direction or polarity difference never does.

Example::

    >>> from medr2.kg.normalize import map_relation
    >>> map_relation("treats"), map_relation("is treated with"), map_relation("does not prevent")
    (('treats', False, 'exact'), ('treats', True, 'synonym'), ('not_prevents', False, 'synonym'))
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any, Optional

from medr2.kg.relations import EN_CUES, NEGATION, RELATIONS, base_name, polarity

_INVERSE_NAMES = {r.inverse: r.name for r in RELATIONS.values() if r.inverse}


def snake(surface: str) -> str:
    return "_".join(re.findall(r"[a-z0-9]+", surface.lower()))


def map_relation(surface: str, synonyms: Optional[dict[str, dict[str, Any]]] = None
                 ) -> tuple[str, bool, str]:
    """(relation, swap head and tail, level) for a relation surface."""
    s = " ".join(surface.lower().split())
    key = snake(s)
    if key in RELATIONS:
        return key, False, "exact"
    if key in _INVERSE_NAMES:
        return _INVERSE_NAMES[key], True, "synonym"
    neg = bool(NEGATION.search(s)) or key.startswith("not_")
    core = snake(NEGATION.sub(" ", s)) if neg else key
    if core in RELATIONS and neg:
        return "not_" + core, False, "exact"
    if core in _INVERSE_NAMES:
        rel = _INVERSE_NAMES[core]
        return ("not_" + rel if neg else rel), True, "synonym"
    plain = NEGATION.sub(" ", s) if neg else s
    plain = re.sub(r"\b(?:does|do|did)\b", " ", plain)
    plain = " ".join(re.sub(r"\b(treat|cause|prevent|reduce|improve|increase|relieve|lead|diagnose|interact)\b",
                            lambda m: m.group(1) + "s", plain).split())
    for cue in EN_CUES:
        if cue.pattern.match(plain + " "):
            rel = cue.relation
            return ("not_" + rel if neg else rel), cue.direction == "rev", "synonym"
    if synonyms and key in synonyms:
        syn = synonyms[key]
        return syn["relation"], bool(syn.get("evidence", {}).get("swap")), \
            ("synonym" if syn["status"] == "confirmed" else "suggestion")
    from rapidfuzz import fuzz, process

    names = [r for r in RELATIONS if polarity(r) == (-1 if neg else 1)]
    hit = process.extractOne(core.replace("_", " "), [n.replace("_", " ").replace("not ", "") for n in names],
                             scorer=fuzz.ratio, score_cutoff=85)
    if hit:
        return names[hit[2]], False, "fuzzy"
    return ("not_" + core if neg and not core.startswith("not_") else key) or "related_to", False, "unmatched"


def rank_relation_synonyms(pairs: dict[str, set[tuple[str, str]]], canonical: list[str], min_score: float = 0.3
                           ) -> list[dict[str, Any]]:
    """For each unmatched relation surface, the best schema relation by
    0.5 * Jaccard(argument pairs) + 0.3 * co-occurrence + 0.2 * substring containment, refused
    when polarity differs or when the swapped argument pairs fit better (a direction difference)."""
    out = []
    for s, sp in pairs.items():
        if s in canonical or not sp:
            continue
        best = None
        for r in canonical:
            rp = pairs.get(r, set())
            if polarity(r) != polarity(s):
                continue
            inter = len(sp & rp)
            jac = inter / len(sp | rp) if rp else 0.0
            swapped = {(t, h) for h, t in rp}
            jac_sw = len(sp & swapped) / len(sp | swapped) if rp else 0.0
            cooc = inter / len(sp)
            words_r = base_name(r).split("_")
            contain = 1.0 if any(w in s.split("_") for w in words_r if len(w) > 3) or base_name(r) in s else 0.0
            score = 0.5 * jac + 0.3 * cooc + 0.2 * contain
            if jac_sw > jac and not (r in RELATIONS and RELATIONS[r].symmetric):
                continue  # the surface reads the other way round: an inverse, never a synonym
            if best is None or score > best["score"]:
                best = {"surface": s, "relation": r, "score": round(score, 4),
                        "evidence": {"jaccard": round(jac, 4), "cooccurrence": round(cooc, 4), "containment": contain,
                                     "pairs": len(sp)}}
        if best and best["score"] >= min_score:
            out.append(best)
    return sorted(out, key=lambda d: -d["score"])


def induce_constraints(typed: dict[str, list[tuple[Optional[str], Optional[str]]]], min_share: float,
                       min_support: int) -> dict[str, dict[str, Any]]:
    """Domain and range per relation: the entity types holding at least ``min_share`` of its
    typed triples (and ``min_support`` of them)."""
    out = {}
    for rel, pairs in typed.items():
        heads = Counter(h for h, _ in pairs if h and h != "Other")
        tails = Counter(t for _, t in pairs if t and t != "Other")
        nh, nt = sum(heads.values()), sum(tails.values())
        dom = sorted(t for t, c in heads.items() if c >= min_support and c / nh >= min_share) if nh else []
        rng = sorted(t for t, c in tails.items() if c >= min_support and c / nt >= min_share) if nt else []
        if dom or rng:
            out[rel] = {"domain": dom, "range": rng, "support": len(pairs)}
    return out


def induce_inverses(pairs: dict[str, set[tuple[str, str]]], min_jaccard: float = 0.5, min_support: int = 3
                    ) -> list[tuple[str, str, float]]:
    """Relation pairs (a, b) where a(x, y) and b(y, x) hold for the same argument pairs."""
    out = []
    rels = [r for r, p in pairs.items() if len(p) >= min_support]
    for i, a in enumerate(rels):
        for b in rels[i + 1:]:
            pa, pb = pairs[a], {(t, h) for h, t in pairs[b]}
            jac = len(pa & pb) / len(pa | pb)
            if jac >= min_jaccard and polarity(a) == polarity(b):
                out.append((a, b, round(jac, 4)))
    return out


def pairs_by_relation(rows: list[tuple[str, str, str]]) -> dict[str, set[tuple[str, str]]]:
    out: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for h, r, t in rows:
        out[r].add((h, t))
    return dict(out)
