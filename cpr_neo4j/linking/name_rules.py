"""The linker's tests on names (linking/resolve.py's rules 2 and 3): which names are weak
(everyday or relation words), which are written as the question writes them, and which
names a question writes only in part."""

from __future__ import annotations

import math

from cpr_neo4j.graph import entity_index
from cpr_neo4j.graph.entity_index import EntityIndex

MIN_PARTIAL = 0.3  # rarity-weighted share of a name's words a partial match must hold
# one-word names that are everyday words say little on their own ("Up", "Her", "It")
_EVERYDAY = """
a an and are as at be by did do does for from had has have he her him his how i in is it
its me my of on or she that the their them they this to up was we were what when where
which who whom whose why will with you your film films movie movies speak spoken play
played name kind type
"""
STOPWORDS = frozenset(_EVERYDAY.split())
# everyday words a one-case question uses that are never read as initials there, however
# few names use them: kinship and family ("mom" is not Mary of Montpellier), people, and
# the common words of templated questions (issue 56: "mom" took a three-word name)
_NOT_INITIALS = """
mom mum mama mommy momma dad daddy papa pop pops son sons kid kids baby wife wives
husband hubby bro bros sis aunt auntie uncle niece nephew cousin gran granny grandma
grandpa nana nan twin twins heir heirs bride groom spouse mate folks fam kin child
children mother father sister brother parent parents family man men guy guys boy boys
girl girls lady lord king queen sir dame old new age born died dead alive live lives
half other one two all any get got gets make made many much more most year years date
day days home town city job work role part team game song book show star stars act
acts did does doing done see saw seen say said tell told know knew find found give gave
take took want like love loved was has got are not who how why what when where which
"""
NOT_INITIALS = frozenset(_NOT_INITIALS.split())
ONE_CASE_LETTERS = 3  # the shortest word read as initials in a one-case question


def weak(index: EntityIndex, words: list[str]) -> bool:
    """Only everyday words or words of the graph's relation names ("language", "children",
    "currency used"): more likely the question's relation than its topic."""
    return all(
        w in STOPWORDS or w.isdigit() or entity_index.stem(w)[:5] in index.relation_prefixes
        for w in words
    )


def written_as(index: EntityIndex, text: str, toks, match) -> bool:
    s, e, i = match
    surface = entity_index.stripped(text[toks[s][1] : toks[e - 1][2]])
    return surface == entity_index.stripped(index.name_of[i] or "")


def partial(index: EntityIndex, folded: list[str]) -> list[tuple[int, int, str]]:
    """Rule 3: names sharing rare words with the question, by the rarity of the words
    shared times the share of the name they make (a name written only in part)."""
    n = max(len(index), 2)
    weight = lambda w: math.log(n / index.names_with.get(w, 1))  # noqa: E731
    scored = []
    where: dict[str, int] = {}
    for p, w in enumerate(folded):
        where.setdefault(w, p)
    for key in index.partial(folded):
        words = set(key.split(" "))
        shared = words & where.keys()  # every word the two share, rare or not
        if weak(index, list(shared)):
            continue
        got = sum(weight(w) for w in shared)
        share = got / sum(weight(w) for w in words)
        if share >= MIN_PARTIAL:
            at = [where[w] for w in shared]
            scored.append((round(got * share, 9), key, min(at), max(at) + 1))
    if not scored:
        return []
    top = max(s[0] for s in scored)
    return [(s, e, i) for sc, key, s, e in scored if sc == top for i in index.key_ids(key)]


def mixed_case(text: str) -> bool:
    """Written in both cases: then case says which words are names ("JFK", "Fall")."""
    return text not in (text.lower(), text.upper())


def _may_spell(text: str, cased: bool, w: str, start: int, end: int) -> bool:
    """Whether question word `w` may be read as initials, before asking the index: two to
    MAX_INITIALS letters, no everyday word; written in capitals in a mixed-case question,
    three letters or more and not an everyday or family word in a one-case one."""
    if not (2 <= len(w) <= entity_index.MAX_INITIALS and w.isalpha()) or w in STOPWORDS:
        return False
    if cased:
        return text[start:end].isupper()
    return len(w) >= ONE_CASE_LETTERS and w not in NOT_INITIALS


def acronym_words(text: str, toks) -> set[str]:
    """The question's words the acronym rule may look up (what the stored index reads)."""
    cased = mixed_case(text)
    return {w for w, start, end in toks if _may_spell(text, cased, w, start, end)}


def acronyms(index: EntityIndex, text: str, toks, found=()) -> list[tuple[int, int, str, int]]:
    """(word, word + 1, entity, letters) for each question word that spells the initials of
    a name: written in capitals in a mixed-case question ("JFK"), in a one-case question
    only a word of three letters or more that no name or relation of the graph uses and
    that is no everyday or family word ("lbj"; "go", "now", "ca" and "mom" spell too much),
    and never a word of a name found whole ("mph" in "10 MPH", "JFK" the film). Per word,
    the entities with the most edges among those it could spell (within half of the best:
    a weak prior; the search decides the rest)."""
    cased = mixed_case(text)
    out = []
    for p, (w, start, end) in enumerate(toks):
        if not _may_spell(text, cased, w, start, end):
            continue
        if not cased and (w in index.names_with or weak(index, [w])):
            continue
        ids = index.initials(w)
        if not ids or any(s <= p < e for s, e, _ in found):
            continue
        top = max(index.degree.get(i, 0) for i in ids)
        out += [(p, p + 1, i, len(w)) for i in ids if 2 * index.degree.get(i, 0) >= top]
    return out
