"""Loaders: bundled MetaQA counts, the NSM sample, RoG parquet/jsonl, generic triples, bad input."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import polars as pl
import pytest

from cpr_neo4j.errors import BadInput, CprError
from cpr_neo4j.loaders import (
    KNOWN_DATASETS,
    load_dataset,
    load_metaqa,
    load_nsm,
    load_rog,
    load_triples,
)
from cpr_neo4j.loaders.base import ENTITIES_SCHEMA, QUESTIONS_SCHEMA, TRIPLES_SCHEMA, Dataset
from cpr_neo4j.loaders.metaqa import bundled_root
from cpr_neo4j.loaders.registry import NSM_SAMPLE
from cpr_neo4j.text import bracket_mentions

DATA = Path(__file__).parent / "data"
SHARED_METAQA = Path(__file__).resolve().parents[2] / "shared/data/metaqa"
EVIL = "`]->() DETACH DELETE n //"


def check_shapes(ds: Dataset) -> None:
    assert dict(ds.triples.schema) == TRIPLES_SCHEMA
    assert dict(ds.entities.schema) == ENTITIES_SCHEMA
    assert dict(ds.questions.schema) == QUESTIONS_SCHEMA
    assert ds.triples.n_unique() == ds.triples.height
    assert ds.entities["id"].n_unique() == ds.entities.height
    assert ds.questions["id"].n_unique() == ds.questions.height
    used = set(ds.triples["head"]) | set(ds.triples["tail"])
    assert set(ds.entities["id"]) == used
    assert set(ds.relation_text) == set(ds.triples["relation"])


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- MetaQA ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def metaqa() -> Dataset:
    return load_metaqa()  # how long it takes: bench/load_metaqa.py, not a unit test


def test_metaqa_bundled_counts(metaqa: Dataset) -> None:
    ds = metaqa
    check_shapes(ds)
    assert ds.problems == []
    assert ds.triples.height == 129_413
    assert ds.entities.height == 42_797
    counts = {(h, s): n for h, s, n in ds.questions.group_by("hops", "split").len().iter_rows()}
    assert counts == {
        (1, "dev"): 9_992,
        (1, "test"): 9_947,
        (2, "dev"): 14_872,
        (2, "test"): 14_872,
        (3, "dev"): 14_274,
        (3, "test"): 14_274,
    }
    assert ds.relation_text["directed_by"] == "directed by"
    assert len(ds.relation_text) == 9


def test_metaqa_rows_as_in_source(metaqa: Dataset) -> None:
    ds = metaqa
    first = ds.questions.row(0, named=True)
    assert first == {
        "id": "1hop-dev-1",
        "text": "what movies did [Temuera Morrison] act in",
        "split": "dev",
        "hops": 1,
        "topics": ["Temuera Morrison"],
        "answers": ["Once Were Warriors", "Tracker", "River Queen"],
    }
    assert ds.questions.filter(pl.col("id") == "2hop-test-14872").height == 1
    # The vectorised mention parser agrees with the shared helper on every question.
    expected = [bracket_mentions(t) for t in ds.questions["text"]]
    assert ds.questions["topics"].to_list() == expected
    names = dict(ds.entities.iter_rows())
    assert names["$"] == "$" and names["Kismet"] == "Kismet"
    kismet = ds.triples.filter(pl.col("head") == "Kismet", pl.col("tail") == "William Dieterle")
    assert kismet["relation"].to_list() == ["directed_by"]


@pytest.mark.skipif(not SHARED_METAQA.is_dir(), reason="shared MetaQA copy not present")
def test_metaqa_bundle_matches_shared_source() -> None:
    pairs = {"kb_partial_reconstructed.txt": "kb_partial_reconstructed.txt"}
    for h in (1, 2, 3):
        for name in ("dev", "test", "qa_dev_qtype", "qa_test_qtype"):
            pairs[f"{h}-hop/{name}.txt"] = f"raw/data/MetaQA/{h}-hop/{name}.txt"
    for bundled, shared in pairs.items():
        data = gzip.decompress((bundled_root() / f"{bundled}.gz").read_bytes())
        assert data == (SHARED_METAQA / shared).read_bytes(), bundled


def test_metaqa_original_layout_and_bad_lines(tmp_path: Path) -> None:
    # yuyuz/MetaQA layout: kb.txt and {k}-hop/vanilla/qa_{split}.txt, train included.
    write(tmp_path / "kb.txt", "A|directed_by|B\nbroken line\nA|starred_actors|\nA|directed_by|B\n")
    qa = "who directed [A]\tB\nno topic here\tB\nwhat [A]\t\nwho directed [A]\tB|B\n"
    write(tmp_path / "1-hop/vanilla/qa_train.txt", qa)
    ds = load_metaqa(tmp_path, hops=[1], splits=["train"])
    assert ds.triples.rows() == [("A", "directed_by", "B")]
    assert ds.questions["id"].to_list() == ["1hop-train-1", "1hop-train-4"]
    assert ds.questions["answers"].to_list() == [["B"], ["B"]]
    kb, q = str(tmp_path / "kb.txt"), str(tmp_path / "1-hop/vanilla/qa_train.txt")
    assert [(p.file, p.line) for p in ds.problems] == [(kb, 2), (kb, 3), (q, 2), (q, 3)]
    assert "expected 3 fields separated by '|', found 1" in str(ds.problems[0])
    assert str(ds.problems[0]).startswith(f"{kb}:2: ")
    with pytest.raises(BadInput, match=r"kb\.txt:2: .*4 problem"):
        load_metaqa(tmp_path, hops=[1], splits=["train"], strict=True)


def test_metaqa_missing_files(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="KB not found"):
        load_metaqa(tmp_path)
    write(tmp_path / "kb.txt", "A|r|B\n")
    with pytest.raises(BadInput, match="1-hop dev questions not found"):
        load_metaqa(tmp_path)
    with pytest.raises(BadInput, match="hops 1, 2, 3"):
        load_metaqa(tmp_path, hops=[4])


# --- NSM / GraftNet --------------------------------------------------------------------------


@pytest.mark.skipif(not NSM_SAMPLE.is_file(), reason="shared WebQSP sample not present")
def test_nsm_sample() -> None:
    ds = load_dataset("webqsp-nsm")
    check_shapes(ds)
    assert ds.problems == []
    assert ds.questions.height == 250
    assert ds.triples.height == 30_186  # unique over the union of the 250 subgraphs
    assert set(ds.questions["split"]) == {"dev"}
    assert ds.questions["hops"].null_count() == 250
    q = ds.questions.filter(pl.col("id") == "WebQTrn-11").row(0, named=True)
    assert q["topics"] == ["m.01sn3"] and q["answers"] == ["m.02hcv8"]
    # Literals are entities with the literal as id.
    literal = ds.triples.filter(pl.col("relation") == "topic_server.population_number")
    assert "431369" in literal["tail"].to_list()
    # Answer texts name entities that appear in the subgraphs.
    assert ds.entities.filter(pl.col("id") != pl.col("name")).height > 0


def test_nsm_graftnet_objects_and_bad_lines(tmp_path: Path) -> None:
    rows = [
        {
            "id": "q1",
            "question": "where was x born",
            "entities": [{"kb_id": "m.x", "text": "X"}],
            "answers": [{"kb_id": "m.y", "text": "Y"}],
            "subgraph": {
                "tuples": [
                    [
                        {"kb_id": "m.x", "text": "X"},
                        {"rel_id": "people.person.place_of_birth"},
                        {"kb_id": "m.y", "text": "Y"},
                    ],
                    ["m.x", "people.person.date_of_birth", "1950-01-01"],
                    ["m.x", "only two"],
                ]
            },
        },
        {"id": "q2", "question": "no graph"},
        {"id": "q1", "question": "duplicate", "subgraph": {"tuples": []}},
    ]
    lines = [json.dumps(r) for r in rows] + ['{"id": "q3", "question": "trunc']
    path = write(tmp_path / "train_simple.jsonl", "\n".join(lines))
    ds = load_nsm(path)
    assert ds.questions["split"].to_list() == ["train"]
    assert dict(ds.entities.iter_rows()) == {"m.x": "X", "m.y": "Y", "1950-01-01": "1950-01-01"}
    assert [(p.line, p.reason.split(" ")[0]) for p in ds.problems] == [
        (1, "1"),
        (2, "needs"),
        (3, "duplicate"),
        (4, "bad"),
    ]
    with pytest.raises(BadInput, match=r"train_simple\.jsonl:1: 1 subgraph.*4 problem"):
        load_nsm(path, strict=True)


# --- RoG -------------------------------------------------------------------------------------


def test_rog_parquet_and_jsonl_identical() -> None:
    a = load_rog("webqsp", DATA / "rog_small.parquet")
    b = load_rog("webqsp", DATA / "rog_small.jsonl")
    check_shapes(a)
    assert a.problems == b.problems == []
    assert a.triples.equals(b.triples)
    assert a.entities.equals(b.entities)
    assert a.questions.equals(b.questions)
    assert a.relation_text == b.relation_text
    assert a.questions.height == 5
    assert set(a.questions["split"]) == {"test"}  # the file name says no split
    assert a.relation_text["people.person.place_of_birth"] == "person place of birth"
    q = {r["id"]: r for r in a.questions.iter_rows(named=True)}
    assert q["WebQTest-0"]["topics"] == ["Jamaica"]
    assert q["WebQTest-4"]["answers"] == ["1961-08-04"]  # empty a_entity falls back to answer
    assert "Egyptian pound" not in set(a.entities["id"])  # answer missing from its graph
    assert "m.03hqm1h" in set(a.entities["id"])  # CVT node kept by MID


def test_rog_split_from_file_names(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    for split in ("train", "validation", "test"):
        df = pl.read_parquet(DATA / "rog_small.parquet")
        df = df.with_columns(pl.concat_str(pl.lit(f"{split}-"), "id").alias("id"))
        df.write_parquet(folder / f"{split}-00000-of-00001-d810a36ed97bc2cc.parquet")
    shutil.copy(DATA / "rog_small.jsonl", folder / "test.jsonl")  # ignored beside parquet
    ds = load_dataset("cwq", tmp_path)
    assert ds.name == "cwq"
    assert dict(ds.questions.group_by("split").len().iter_rows()) == {
        "train": 5,
        "dev": 5,
        "test": 5,
    }
    assert load_rog("webqsp", folder, split="dev").questions["split"].unique().to_list() == ["dev"]


def test_rog_missing_column_and_bad_rows(tmp_path: Path) -> None:
    df = pl.read_parquet(DATA / "rog_small.parquet")
    df.drop("graph").write_parquet(tmp_path / "test.parquet")
    with pytest.raises(BadInput, match="lacks column.*graph"):
        load_rog("webqsp", tmp_path / "test.parquet")
    (tmp_path / "junk.parquet").write_bytes(b"not parquet")
    with pytest.raises(BadInput, match="not a readable parquet"):
        load_rog("webqsp", tmp_path / "junk.parquet")

    rows = [json.loads(line) for line in (DATA / "rog_small.jsonl").read_text().splitlines()]
    rows[0]["graph"].append(["Jamaica", "too short"])
    del rows[1]["q_entity"]
    text = "\n".join(json.dumps(r) for r in rows)
    path = write(tmp_path / "test.jsonl", text[: len(text) - 20])  # cut inside the last row
    ds = load_rog("webqsp", path)
    assert ds.questions["id"].to_list() == ["WebQTest-0", "WebQTest-2", "WebQTest-3"]
    assert [(p.line, p.reason.split(" ")[0]) for p in ds.problems] == [
        (1, "1"),
        (2, "missing"),
        (5, "bad"),
    ]
    with pytest.raises(BadInput, match=r"test\.jsonl:1: 1 of its graph entries .*3 problem"):
        load_rog("webqsp", path, strict=True)


def test_rog_offline_download_is_one_line_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import huggingface_hub

    def offline(**kwargs: object) -> str:
        assert kwargs["repo_id"] == "rmanluo/RoG-webqsp" and kwargs["repo_type"] == "dataset"
        raise OSError("Network is unreachable\nsecond line")

    monkeypatch.setattr(huggingface_hub, "snapshot_download", offline)
    with pytest.raises(CprError) as err:
        load_dataset("webqsp")
    message = str(err.value)
    assert "\n" not in message
    assert "cannot download rmanluo/RoG-webqsp" in message
    assert "cpr ingest webqsp --from PATH" in message


# --- generic triples -------------------------------------------------------------------------


def test_generic_triples_with_entities_and_questions(tmp_path: Path) -> None:
    triples = write(
        tmp_path / "triples.tsv",
        "head\trelation\ttail\n"
        "e1\tworks_at\te2\n"
        f"e1\t{EVIL}\te3\n"
        "e1\tworks_at\te2\n"
        "e2\tlocated.in`x\te3\n",
    )
    entities = write(
        tmp_path / "entities.tsv", "id\tname\ne1\te1\ne1\tAda Lovelace\ne1\tAda\ne2\tAcme\n"
    )
    questions = write(
        tmp_path / "questions.jsonl",
        json.dumps(
            {"id": "a", "question": "where does ada work", "topics": ["e1"], "answers": ["e2"]}
        )
        + "\n"
        + json.dumps(
            {
                "id": "b",
                "question": "q",
                "topics": ["e1"],
                "answers": ["e3"],
                "split": "test",
                "hops": 2,
            }
        )
        + "\n",
    )
    ds = load_triples("mine", triples, entities, questions)
    check_shapes(ds)
    # a relation that cannot be a relationship type is a skipped line, like any malformed one
    allowed = "(letters, digits, _ . - : / and inner spaces only)"
    assert [str(p) for p in ds.problems] == [
        f"{triples}:3: relation {EVIL!r} is not allowed as a relationship type {allowed}",
        f"{triples}:5: relation 'located.in`x' is not allowed as a relationship type {allowed}",
    ]
    assert ds.triples.rows() == [("e1", "works_at", "e2")]
    assert dict(ds.entities.iter_rows()) == {"e1": "Ada Lovelace", "e2": "Acme"}
    assert ds.questions.rows() == [
        ("a", "where does ada work", "train", None, ["e1"], ["e2"]),
        ("b", "q", "test", 2, ["e1"], ["e3"]),
    ]


def test_generic_bad_input(tmp_path: Path) -> None:
    triples = write(tmp_path / "t.tsv", "a\tr\tb\na\tr\nx\t\ty\na\tr\tb\tc\n")
    questions = write(
        tmp_path / "q.jsonl",
        '{"id": "1", "question": "q", "topics": ["a"], "answers": ["b"]}\n'
        "[1, 2]\n"
        '{"id": "2", "question": "q", "topics": "a", "answers": ["b"]}\n'
        '{"id": "3", "question": "q", "topics": ["a"], "answers": ["b"], "split": "valid"}\n'
        '{"id": "1", "question": "again", "topics": ["a"], "answers": ["b"]}\n',
    )
    ds = load_triples("g", triples, questions=questions)
    assert ds.triples.rows() == [("a", "r", "b")]
    assert [str(p) for p in ds.problems] == [
        f"{triples}:2: expected 3 fields separated by '\\t', found 2",
        f"{triples}:3: empty field",
        f"{triples}:4: expected 3 fields separated by '\\t', found 4",
        f"{questions}:2: not a JSON object",
        f"{questions}:3: 'topics' and 'answers' must be lists of entity ids",
        f"{questions}:4: 'split' must be one of train, dev, test",
        f"{questions}:5: duplicate question id '1' (first kept)",
    ]
    with pytest.raises(BadInput, match=r"t\.tsv:2: .*\(7 problem"):
        load_triples("g", triples, questions=questions, strict=True)


def test_empty_graph_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(BadInput, match="has no triples"):
        load_triples("g", write(tmp_path / "t.tsv", "head\trelation\ttail\n\n"))
    with pytest.raises(BadInput, match="has no triples"):
        load_triples("g", write(tmp_path / "bad.tsv", "only\ttwo\n"))
    with pytest.raises(BadInput, match="file not found: .*nope.tsv"):
        load_triples("g", tmp_path / "nope.tsv")
    with pytest.raises(BadInput, match="has no triples"):
        load_rog("webqsp", write(tmp_path / "test.jsonl", ""))


def test_truncated_gzip_keeps_lines_before_the_break(tmp_path: Path) -> None:
    body = "".join(f"e{i}\tr\te{i + 1}\n" for i in range(5000)).encode()
    whole = gzip.compress(body)
    path = tmp_path / "triples.tsv.gz"
    path.write_bytes(whole)
    assert load_triples("g", path).triples.height == 5000
    path.write_bytes(whole[: len(whole) // 2])
    ds = load_triples("g", path)
    assert 0 < ds.triples.height < 5000
    assert ds.triples.rows()[-1] == (f"e{ds.triples.height - 1}", "r", f"e{ds.triples.height}")
    assert len(ds.problems) == 1 and "truncated gzip" in ds.problems[0].reason
    with pytest.raises(BadInput, match="truncated gzip"):
        load_triples("g", path, strict=True)


def test_non_utf8_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "t.tsv"
    path.write_bytes(b"a\tr\tb\nc\tr\t\xff\xfe\n")
    ds = load_triples("g", path)
    assert ds.triples.rows() == [("a", "r", "b")]
    assert [(p.line, p.reason) for p in ds.problems] == [(2, "not UTF-8 text")]


def test_registry() -> None:
    assert set(KNOWN_DATASETS) == {
        "metaqa",
        "metaqa-matched",
        "metaqa-plain",
        "webqsp",
        "cwq",
        "webqsp-nsm",
    }
    with pytest.raises(BadInput, match="unknown dataset 'freebase'"):
        load_dataset("freebase")
    ds = load_dataset("metaqa", hops=[1], splits=["dev"])
    assert ds.questions.height == 9_992


def test_split_words(tmp_path: Path) -> None:
    ds = load_rog("webqsp", DATA / "rog_small.jsonl", split="validation")
    assert set(ds.questions["split"]) == {"dev"}
    with pytest.raises(BadInput, match="unknown split 'holdout'"):
        load_rog("webqsp", DATA / "rog_small.jsonl", split="holdout")


def test_metaqa_matched_thins_only_test_only_answer_triples_to_devs_rate():
    """The `metaqa-matched` KB drops only 1-hop test answer triples that are not dev answer
    triples, about as many as dev's missing rate predicts, so that 1-hop test questions
    reach a gold answer in one hop about as often as dev questions do."""
    from collections import defaultdict

    from cpr_neo4j.loaders.metaqa import _find, bundled_root
    from cpr_neo4j.loaders.metaqa_matched import _answer_triples
    from cpr_neo4j.loaders.registry import load_dataset

    full, matched = load_dataset("metaqa"), load_dataset("metaqa-matched")
    assert matched.name == "metaqa-matched"
    rows = lambda d: set(d.triples.select("head", "relation", "tail").iter_rows())  # noqa: E731
    before, after = rows(full), rows(matched)
    dropped = before - after
    assert after <= before and dropped
    dev, test = (_answer_triples(bundled_root(), s, _find) for s in ("dev", "test"))
    assert dropped <= (test - dev)  # nothing that dev (or training) questions rely on
    pool = (test - dev) & before
    # dev's missing rate, measured on dev; the draw is Binomial(len(pool), rate)
    dev_only = dev - test
    rate = 1 - len(dev_only & before) / len(dev_only)
    sd = (len(pool) * rate * (1 - rate)) ** 0.5
    assert abs(len(dropped) - len(pool) * rate) < 4 * sd
    assert matched.questions.height == full.questions.height

    def reach(triples: set, split: str) -> float:
        nbrs = defaultdict(set)
        for h, _, t in triples:
            nbrs[h].add(t)
            nbrs[t].add(h)
        qs = full.questions.filter((pl.col("hops") == 1) & (pl.col("split") == split))
        hits = [
            bool(set(answers) & set().union(*(nbrs.get(t, set()) for t in topics)))
            for topics, answers in qs.select("topics", "answers").iter_rows()
        ]
        return sum(hits) / len(hits)

    dev_reach, test_before, test_after = (
        reach(after, "dev"),
        reach(before, "test"),
        reach(after, "test"),
    )
    print(f"\n1-hop reachable: dev {dev_reach:.4f}; test {test_before:.4f} -> {test_after:.4f}")
    assert reach(before, "dev") == dev_reach  # dev untouched
    assert test_before > 0.999 and abs(test_after - dev_reach) < 0.01


def test_metaqa_plain_is_metaqa_without_brackets_and_with_its_gold_topics():
    from cpr_neo4j.loaders import load_dataset

    plain = load_dataset("metaqa-plain", hops=(2,), splits=("test",))
    bracketed = load_dataset("metaqa", hops=(2,), splits=("test",))
    assert plain.name == "metaqa-plain" and bracketed.name == "metaqa"
    p = plain.questions.sort("id").select("id", "text", "topics", "answers").rows()
    b = bracketed.questions.sort("id").select("id", "text", "topics", "answers").rows()
    assert len(p) == len(b) == 14_872
    assert not any("[" in text or "]" in text for _, text, _, _ in p)
    for (pi, pt, ptop, pa), (bi, bt, btop, ba) in zip(p, b, strict=True):
        assert (pi, ptop, pa) == (bi, btop, ba) and pt == bt.replace("[", "").replace("]", "")
