"""A small royal-family genealogy for the generic triples loader, as a user's own graph
would come: underscored names (`prince_william`), templated one-case questions that say
"mom", "dad", "kid", "wife", "son" or "other half" where the graph says mother, father,
child and spouse, and names whose initials spell those words (`mary_of_montpellier`:
"mom"), so a linker that reads everyday words as initials is caught.

    python bench/royals.py OUT          # writes OUT/triples.tsv and OUT/questions.jsonl
    cpr ingest royals --triples OUT/triples.tsv --questions OUT/questions.jsonl
    python bench/linking_neo4j.py royals --splits train,dev,test

Each question's answers are read off the graph; its split is a hash of its id
(70/10/20, as `--hash-split 70,10,20`)."""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

# (child, mother, father); spouses below. Fictional people whose initials spell a kinship
# word share the graph with the real family, as names do in any big genealogy.
FAMILY = [
    ("prince_william", "princess_diana", "king_charles_iii"),
    ("prince_harry", "princess_diana", "king_charles_iii"),
    ("prince_george", "catherine_middleton", "prince_william"),
    ("princess_charlotte", "catherine_middleton", "prince_william"),
    ("prince_louis", "catherine_middleton", "prince_william"),
    ("archie_mountbatten_windsor", "meghan_markle", "prince_harry"),
    ("lilibet_mountbatten_windsor", "meghan_markle", "prince_harry"),
    ("king_charles_iii", "queen_elizabeth_ii", "prince_philip"),
    ("princess_anne", "queen_elizabeth_ii", "prince_philip"),
    ("prince_andrew", "queen_elizabeth_ii", "prince_philip"),
    ("prince_edward", "queen_elizabeth_ii", "prince_philip"),
    ("queen_elizabeth_ii", "queen_elizabeth_the_queen_mother", "king_george_vi"),
    ("princess_margaret", "queen_elizabeth_the_queen_mother", "king_george_vi"),
    ("zara_tindall", "princess_anne", "mark_phillips"),
    ("peter_phillips", "princess_anne", "mark_phillips"),
    ("princess_beatrice", "sarah_ferguson", "prince_andrew"),
    ("princess_eugenie", "sarah_ferguson", "prince_andrew"),
    ("james_of_montpellier", "mary_of_montpellier", "peter_ii_of_aragon"),
    ("sancho_of_montpellier", "mary_of_montpellier", "david_andrew_dunn"),
    ("kira_ida_dunn", "wilma_ivy_finch_evans", "david_andrew_dunn"),
    ("simon_otto_north", "wilma_ivy_finch_evans", "david_andrew_dunn"),
]
SPOUSES = [
    ("prince_william", "catherine_middleton"),
    ("prince_harry", "meghan_markle"),
    ("king_charles_iii", "princess_diana"),
    ("king_charles_iii", "queen_camilla"),
    ("queen_elizabeth_ii", "prince_philip"),
    ("king_george_vi", "queen_elizabeth_the_queen_mother"),
    ("princess_anne", "mark_phillips"),
    ("prince_andrew", "sarah_ferguson"),
    ("prince_edward", "sophie_duchess_of_edinburgh"),
    ("mary_of_montpellier", "peter_ii_of_aragon"),
    ("david_andrew_dunn", "wilma_ivy_finch_evans"),
]
# how a question says each relation (and which way it reads it)
TEMPLATES = {
    "mother": ["who is the mom of {}", "who is {}'s mom", "who is the mother of {}"],
    "father": ["who is the dad of {}", "who is {}'s dad", "who is the father of {}"],
    "spouse": ["who is the wife of {}", "who is {}'s other half", "who did {} marry"],
    "child": ["who are the kids of {}", "who is the son of {}", "name a kid of {}"],
}


def triples() -> list[tuple[str, str, str]]:
    out = []
    for child, mother, father in FAMILY:
        out += [(child, "mother", mother), (child, "father", father)]
        out += [(mother, "child", child), (father, "child", child)]
    for a, b in SPOUSES:
        out += [(a, "spouse", b), (b, "spouse", a)]
    return out


def split_of(qid: str) -> str:
    u = int.from_bytes(hashlib.sha256(qid.encode()).digest()[:8], "big") / 2**64
    return "train" if u < 0.7 else "dev" if u < 0.8 else "test"


def questions(rows: list[tuple[str, str, str]]) -> list[dict]:
    answers: dict[tuple[str, str], list[str]] = {}
    for h, r, t in rows:
        answers.setdefault((h, r), []).append(t)
    out = []
    for (h, r), ans in sorted(answers.items()):
        for k, template in enumerate(TEMPLATES[r]):
            # half the questions write the name as the graph does, half with spaces
            name = h if k % 2 == 0 else h.replace("_", " ")
            qid = f"royals-{h}-{r}-{k}"
            q = {"id": qid, "question": template.format(name), "topics": [h]}
            out.append(q | {"answers": sorted(ans), "split": split_of(qid)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path)
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    rows = triples()
    (a.out / "triples.tsv").write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows))
    qs = questions(rows)
    (a.out / "questions.jsonl").write_text("".join(json.dumps(q) + "\n" for q in qs))
    print(f"{len(rows)} triples, {len(qs)} questions in {a.out}")


if __name__ == "__main__":
    main()
