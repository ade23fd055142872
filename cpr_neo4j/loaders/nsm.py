"""NSM / GraftNet-style JSON lines: one question per line with its own subgraph of Freebase ids.

`{"id", "question", "entities": [topic], "answers": [{"kb_id", "text"}],
  "subgraph": {"tuples": [[head, relation, tail], ...]}}`. Ids are MIDs or literals (dates,
numbers), taken as given. The graph is the union of the subgraphs; Dataset.subgraphs keeps
each question's own (its tuples' entities plus its topic entities) for `--scope subgraph`.
GraftNet writes items as `{"kb_id"|"rel_id", "text"}` objects instead of strings; both are
read. NSM's integer-indexed files (which need its entities.txt map) are not.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from cpr_neo4j.errors import BadInput
from cpr_neo4j.loaders.base import (
    ENTITIES_SCHEMA,
    SUBGRAPHS_SCHEMA,
    TRIPLES_SCHEMA,
    Dataset,
    Problem,
    build_dataset,
    check_split,
    questions_frame,
    read_jsonl,
    split_from_name,
)

DEFAULT_SPLIT = "test"  # when neither the caller nor the file name says; never leaks into training
_SUFFIXES = (".jsonl", ".json", ".jsonl.gz", ".json.gz")


def _ref(item: object, key: str = "kb_id") -> tuple[str | None, str | None]:
    """(id, name) of a plain id string or a GraftNet {"kb_id"/"rel_id", "text"} object."""
    if isinstance(item, str):
        return (item or None), None
    if isinstance(item, dict) and isinstance(item.get(key), str) and item[key]:
        text = item.get("text")
        return item[key], text if isinstance(text, str) and text else None
    return None, None


def _files(source: Path) -> list[Path]:
    if source.is_dir():
        found = sorted(p for p in source.iterdir() if p.name.endswith(_SUFFIXES))
        if not found:
            raise BadInput(f"no .jsonl/.json files in {source}")
        return found
    if not source.is_file():
        raise BadInput(f"file not found: {source}")
    return [source]


def load_nsm(
    source: Path, split: str | None = None, name: str = "webqsp-nsm", strict: bool = False
) -> Dataset:
    """Questions and the union of their subgraphs from a .jsonl file or a folder of them.

    split: for every file; None takes it from each file name (train/dev/validation/test).
    """
    split = check_split(split)
    source = Path(source)
    heads: list[str] = []
    rels: list[str] = []
    tails: list[str] = []
    names: dict[str, list[str]] = {"id": [], "name": []}
    q: list[dict] = []
    members: dict[str, list[str]] = {"question": [], "entity": []}
    problems: list[Problem] = []

    def named(item: object, key: str = "kb_id") -> str | None:
        ident, text = _ref(item, key)
        if ident is not None and text is not None:
            names["id"].append(ident)
            names["name"].append(text)
        return ident

    for path in _files(source):
        file, file_split = str(path), split or split_from_name(path) or DEFAULT_SPLIT
        rows, bad = read_jsonl(path)
        problems += bad
        for line, obj in rows:
            qid, text, graph = obj.get("id"), obj.get("question"), obj.get("subgraph")
            tuples = graph.get("tuples") if isinstance(graph, dict) else None
            if not (isinstance(qid, str) and qid and isinstance(text, str) and text):
                problems.append(Problem(file, line, "needs a non-empty 'id' and 'question'"))
                continue
            if not isinstance(tuples, list):
                problems.append(Problem(file, line, "needs 'subgraph': {'tuples': [...]}"))
                continue
            broken, mine = 0, []
            for t in tuples:
                ids = (
                    [named(t[0]), _ref(t[1], "rel_id")[0], named(t[2])]
                    if isinstance(t, list) and len(t) == 3
                    else [None]
                )
                if None in ids:
                    broken += 1
                    continue
                heads.append(ids[0])
                rels.append(ids[1])
                tails.append(ids[2])
                mine += (ids[0], ids[2])
            if broken:
                problems.append(
                    Problem(file, line, f"{broken} subgraph tuple(s) not [head, relation, tail]")
                )
            items = [obj.get("entities") or [], obj.get("answers") or []]
            if not all(isinstance(x, list) for x in items):
                problems.append(Problem(file, line, "'entities' and 'answers' must be lists"))
                continue
            topics = [named(e) for e in items[0]]
            answers = [named(a) for a in items[1]]
            if None in topics or None in answers:
                problems.append(Problem(file, line, "a topic or answer without an id (skipped)"))
            mine += [t for t in topics if t is not None]
            members["entity"] += mine  # duplicates go in build_dataset
            members["question"] += [qid] * len(mine)
            q.append(
                {
                    "id": qid,
                    "text": text,
                    "split": file_split,
                    "hops": None,
                    "topics": [t for t in topics if t is not None],
                    "answers": [a for a in answers if a is not None],
                    "_file": file,
                    "_line": line,
                }
            )

    triples = pl.DataFrame({"head": heads, "relation": rels, "tail": tails}, schema=TRIPLES_SCHEMA)
    names_frame = pl.DataFrame(names, schema=ENTITIES_SCHEMA)
    subgraphs = pl.DataFrame(members, schema=SUBGRAPHS_SCHEMA)
    return build_dataset(
        name, str(source), triples, questions_frame(q), problems, strict, names_frame, subgraphs
    )
