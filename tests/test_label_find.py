"""`/TEXT` in `cpr label`: the candidates whose name holds the typed words, folded as the
linker folds names, whole words only, wherever the scorer ranked them."""

from cpr_neo4j.training.labelling import Choice, find

CHOICES = [
    Choice(entity="e1", name="Talk to Her", path="directed_by", hops=1, cost=0.1),
    Choice(entity="e2", name="Pedro Almodóvar", path="directed_by", hops=1, cost=0.2),
    Choice(entity="e3", name="Almodóvar_Films", path="x", hops=2, cost=0.3),
    Choice(entity="e4", name="Pedrosa", path="x", hops=2, cost=0.4),
]


def test_find_folds_accents_and_case_and_keeps_whole_words():
    assert find(CHOICES, "almodovar") == [1, 2]
    assert find(CHOICES, "PEDRO  almodóvar") == [1]
    assert find(CHOICES, "pedro") == [1]  # not "Pedrosa": words, not substrings
    assert find(CHOICES, "almodovar films") == [2]  # an underscore separates words
    assert find(CHOICES, "dro") == []
    assert find(CHOICES, "  ") == []
