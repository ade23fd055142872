"""A named topic entity (--entity, the HTTP `entity` field, the named curves calibration
stores): one resolution rule and one masking rule (linking/named.py)."""

from __future__ import annotations

from cpr_neo4j.graph.entity_index import EntityIndex
from cpr_neo4j.linking import resolve
from cpr_neo4j.linking.named import mask_named, spans
from cpr_neo4j.linking.readings import choose, from_linking, masked_text


def index(*names):
    return EntityIndex(list(names), list(names), None, ())


def named(idx, text, entity):
    return from_linking(text, resolve.resolve(None, "d", text, entity, index=idx))


def test_a_short_name_masks_whole_words_only():
    # "It" (the novel) inside "writer": a substring replace gave "wrENTer of ENT"
    assert mask_named("who is the writer of It", ["It"]) == "who is the writer of ENT"
    assert mask_named("who wrote it", ["It"]) == "who wrote ENT"
    assert mask_named("who wrote Itch", ["It"]) == "who wrote Itch"
    linked = named(index("It", "Stephen King"), "who is the writer of It", "It")
    assert linked.masked == "who is the writer of ENT"


def test_names_are_folded_as_question_text_linking_folds_them():
    text = "what films did Amélie Poulain appear in"
    assert mask_named(text, ["amelie poulain"]) == "what films did ENT appear in"
    assert mask_named("who directed amelie poulain", ["Amélie Poulain"]) == "who directed ENT"
    for written in ("ridley_scott", "Ridley-Scott", "RIDLEY SCOTT", "ridley  scott"):
        assert mask_named(f"which movies did {written} direct", ["Ridley Scott"]) == (
            "which movies did ENT direct"
        ), written
    assert mask_named("who directed [Dune]", ["dune"]) == "who directed ENT"
    assert spans("Dune, then dune again", "DUNE") == [(0, 4), (11, 15)]


def test_any_spelling_of_a_name_resolves_to_the_entity():
    idx = index("Pedro Almodóvar", "Ridley Scott", "Amélie Poulain")
    for given, want in (
        ("Pedro Almodovar", "Pedro Almodóvar"),
        ("ridley_scott", "Ridley Scott"),
        ("Ridley-Scott", "Ridley Scott"),
        ("RIDLEY SCOTT", "Ridley Scott"),
        ("amelie poulain", "Amélie Poulain"),
    ):
        linked = named(idx, "what did they make", given)
        assert [t["id"] for t in linked.topics] == [want], given
        assert len(linked.choices) == 1
    # the masked text is the one the named curves were calibrated with
    linked = named(idx, "which films did pedro almodovar direct", "Pedro Almodovar")
    assert linked.masked == "which films did ENT direct"
    text = "which films did pedro almodovar direct"
    assert masked_text(text, linked.linking.choices[0]) == linked.masked


class _Cand:
    def __init__(self, cost):
        self.cost, self.ends = cost, ("x",)


class _Found:
    def __init__(self, cost):
        self._c = [_Cand(cost)]

    def candidates(self):
        return self._c


def test_a_name_two_entities_share_is_a_tie_the_search_decides_and_says_who_gave_it():
    idx = index("Ridley Scott", "ridley scott")
    text = "which movies did ridley scott direct"
    linked = named(idx, text, "RIDLEY SCOTT")
    assert sorted(ids for ids, _ in linked.choices) == [["Ridley Scott"], ["ridley scott"]]
    assert {m for _, m in linked.choices} == {"which movies did ENT direct"}
    i, chosen = choose(linked, [_Found(0.5), _Found(-1.0)])  # the second scores best
    assert i == 1 and chosen.record()["rule"] == "best-scoring path"
    note = chosen.notes[-1]
    assert note.startswith("the name given to --entity fits 2 entities equally well")
    assert "the question's names" not in note
    # a tie that came from the question's own words still says so
    plain = from_linking(text, resolve.resolve(None, "d", text, index=idx))
    assert (
        choose(plain, [_Found(0.5), _Found(-1.0)])[1]
        .notes[-1]
        .startswith("the question's names fit 2 entities")
    )
