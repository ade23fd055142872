"""Hint parsing, the OpenAI-schema client against a real local HTTP server, and the bonus."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import types
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from cpr_neo4j.errors import BadInput, CprError, HintFailed
from cpr_neo4j.hints import base as hints_mod
from cpr_neo4j.hints import llm as llm_hints
from cpr_neo4j.hints.base import NoHints, hint_bonus
from cpr_neo4j.hints.llm import OpenAIHints
from cpr_neo4j.hints.replies import parse_chains, relation_lookup
from cpr_neo4j.search.base import InMemoryGraph, Step

RELS = ["directed_by", "starred_actors", "has_genre", "release_year"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            '{"chains": [["directed_by"], ["starred_actors", "directed_by"]]}',
            [["directed_by"], ["starred_actors", "directed_by"]],
        ),
        # mixed list: a bare string is a one-relation chain; a chain with a number is dropped
        (
            '{"chains": ["has_genre", ["starred_actors", 3], ["release_year"]]}',
            [["has_genre"], ["release_year"]],
        ),
        ('{"chains": [["directed_by", "born_in"], ["has_genre"]]}', [["has_genre"]]),  # invented
        (
            '{"chains": [["directed_by", "directed_by", "has_genre"], ["has_genre"]]}',
            [["has_genre"]],
        ),  # longer than H = 2
        ('Sure! Here it is:\n{"chains": [["Directed_By"]]}\nHope it helps', [["directed_by"]]),
        ('```json\n{"chains": [["~starred_actors"]]}\n```', [["starred_actors"]]),
        ('<think>hmm</think>{"chains": [["has_genre"], ["has_genre"]]}', [["has_genre"]]),
        ('[["directed_by"]]', [["directed_by"]]),  # bare list
        ('{"chains": [[], ["has_genre"], {"a": 1}]}', [["has_genre"]]),
        ('{"chains": [["Directed by", "has-genre"]]}', [["directed_by", "has_genre"]]),
    ],
)
def test_parse_good_and_malformed(reply, expected):
    assert parse_chains(reply, RELS, hops=2) == expected


@pytest.mark.parametrize(
    "reply", ["", "not json at all", '{"answer": "x"}', '{"chains": "directed_by"}', "null", "{"]
)
def test_parse_garbage_is_an_error_not_silently_no_hints(reply):
    with pytest.raises(HintFailed, match="no chains list") as info:
        parse_chains(reply, RELS, hops=2)
    assert "\n" not in str(info.value)


def test_parse_truncates_to_four_chains():
    reply = json.dumps({"chains": [[r] for r in RELS] + [["directed_by", "has_genre"]]})
    assert parse_chains(reply, RELS, hops=2) == [[r] for r in RELS]


class _ChatServer:
    """A real chat-completions endpoint on 127.0.0.1; replies chosen by a word in the question."""

    replies = {
        "good": '{"chains": [["starred_actors", "directed_by"]]}',
        "bad": "{chains: oops",
        "invented": '{"chains": [["place_of_birth"], ["directed_by"]]}',
        "fixable": '{"relations": ["directed_by"]}',  # good after the corrective follow-up
    }

    def __init__(self):
        self.requests: list[dict] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append({"path": self.path, "body": body})
                question = body["messages"][-1]["content"]
                if question == llm_hints._REPAIR:  # the corrective follow-up
                    question = "good" if "fixable" in body["messages"][-3]["content"] else "bad"
                if "crash" in question:
                    self.send_response(500)
                    self.end_headers()
                    return
                if "slow" in question:
                    time.sleep(1.5)
                key = next((k for k in outer.replies if k in question), "good")
                reply = {
                    "choices": [{"message": {"role": "assistant", "content": outer.replies[key]}}]
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.handle_error = lambda *a: None  # a client that timed out: nothing to see
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server():
    s = _ChatServer()
    yield s
    s.close()


def test_http_client_good_reply_and_request_schema(server, tmp_path):
    h = OpenAIHints(server.url, "qwen3-8b", timeout=5, cache_path=tmp_path / "hints.jsonl")
    assert h.hints("good: who directed films of [tom]", RELS, 2) == [
        ["starred_actors", "directed_by"]
    ]
    req = server.requests[0]
    assert req["path"] == "/v1/chat/completions"
    body = req["body"]
    assert body["model"] == "qwen3-8b" and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert "directed_by" in body["messages"][-1]["content"]  # allowed relations listed
    assert h.mode == "llm:qwen3-8b"


def test_http_client_bad_and_invented_replies(server, caplog):
    h = OpenAIHints(server.url + "/v1/", "m", timeout=5)  # a base URL ending in /v1 works too
    with pytest.raises(HintFailed, match="no chains list"):
        h.hints("bad question", RELS, 2)  # asked, then one corrective follow-up
    assert len(server.requests) == 2 and h.stats.repaired == 1
    assert h.hints("fixable question", RELS, 2) == [["starred_actors", "directed_by"]]
    assert h.stats.repaired == 2
    with caplog.at_level(logging.WARNING):
        assert h.hints("invented question", RELS, 2) == [["directed_by"]]
    assert not caplog.records  # counted in stats (one summary line), not a warning per question
    with pytest.raises(HintFailed, match="failed 2 times"):
        h.hints("crash question", RELS, 2)  # HTTP 500, retried once
    assert sum("crash" in r["body"]["messages"][-1]["content"] for r in server.requests) == 2
    assert h.stats.dropped == 1
    assert all(r["path"] == "/v1/chat/completions" for r in server.requests)


def test_cache_replays_replies_and_skips_failures(server, tmp_path):
    path = tmp_path / "cache" / "hints.jsonl"
    h = OpenAIHints(server.url, "m", timeout=5, cache_path=path)
    first = h.hints("good one", RELS, 2)
    with pytest.raises(HintFailed):
        h.hints("crash one", RELS, 2)
    assert h.hints("good one", RELS, 2) == first
    assert len(server.requests) == 3  # good once, crash twice (one retry)
    again = OpenAIHints("http://127.0.0.1:9", "m", timeout=0.5, cache_path=path)
    assert again.hints("good one", RELS, 2) == first  # from the file: no server needed
    assert again.stats.cached == 1 and again.stats.asked == 0
    # the key holds the relations and H: another list is another prompt (here: no server)
    with pytest.raises(HintFailed):
        again.hints("good one", RELS[:2], 2)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["question"] for r in rows] == ["good one"]  # the failure was not cached
    assert rows[0]["prompt"] == hints_mod.PROMPT_VERSION and rows[0]["hops"] == 2
    assert rows[0]["model"] == "m" and rows[0]["relations"] == sorted(RELS)


def test_prefetch_sends_each_distinct_prompt_once_in_parallel(server, tmp_path):
    h = OpenAIHints(server.url, "m", timeout=5, cache_path=tmp_path / "h.jsonl", parallel=3)
    items = [(f"good {i % 4}", RELS, 2) for i in range(12)] + [("good 0", RELS[:3], 2)]
    h.prefetch(items)
    assert len(server.requests) == 5 and h.stats.asked == 5  # 4 questions + 1 other list
    assert h.hints("good 3", RELS, 2) == [["starred_actors", "directed_by"]]
    assert len(server.requests) == 5 and h.stats.cached == 1
    with pytest.raises(HintFailed):
        h.prefetch([("good 9", RELS, 2), ("bad 9", RELS, 2)])  # one failure fails the batch
    assert h.stats.line().startswith("hints: 8 LLM call(s)")  # 5 + good 9 + bad 9 + repair


def test_relation_lookup_maps_spellings_back_to_types():
    rels = ["film.film.directed_by", "people.person.place_of_birth", "tv.show.directed_by"]
    table = relation_lookup(rels)
    assert table["place_of_birth"] == "people.person.place_of_birth"  # unique tail
    assert "directed_by" not in table  # ambiguous tail: no guess
    assert table["film.film.directed_by"] == "film.film.directed_by"


def test_timeout_and_unreachable_server_are_bounded_errors(server, monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]  # closed again below: nothing listens there
    with pytest.raises(HintFailed, match="start the server"):
        OpenAIHints(f"http://127.0.0.1:{dead}", "m", timeout=1).hints("q", RELS, 2)
    # The slow question's reply (a valid one) comes after 1.5 s: a client that waited for it
    # would answer; one bounded by its 0.3 s timeout fails with Timeout after ATTEMPTS tries
    # and one RETRY_WAIT between them (timing itself is bench's business, not a unit test's).
    slow = OpenAIHints(server.url, "m", timeout=0.3)
    waits: list[float] = []
    clock = types.SimpleNamespace(sleep=waits.append, perf_counter=time.perf_counter)
    monkeypatch.setattr(llm_hints, "time", clock)  # the module's clock only, not the server's
    with pytest.raises(HintFailed, match="Timeout"):
        slow.hints("slow question", RELS, 2)
    tries = [r for r in server.requests if "slow question" in r["body"]["messages"][-1]["content"]]
    assert len(tries) == llm_hints.ATTEMPTS == 2
    assert waits == [llm_hints.RETRY_WAIT] * (llm_hints.ATTEMPTS - 1)


def test_provider_options():
    from cpr_neo4j.stages.retrieval import hint_provider

    assert hint_provider().mode == "none"
    h = hint_provider("http://127.0.0.1:9", "tiny")
    assert h.mode == "llm:tiny" and h.prompt == hints_mod.PROMPT_VERSION
    for kwargs, message in [
        ({"llm_url": "http://x", "llm": "vllm:m"}, "not both"),
        ({"llm": "openai:m"}, "vllm:MODEL"),
        ({"llm_model": "m"}, "needs --llm-url"),
    ]:
        with pytest.raises(BadInput, match=message):
            hint_provider(**kwargs)


def test_in_process_vllm_without_a_gpu_is_one_line():
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here: bench/gpu_check.py exercises vLLM")
    with pytest.raises(CprError, match="need a CUDA GPU") as info:
        llm_hints.VllmHints("Qwen/Qwen3-0.6B")
    assert "\n" not in str(info.value)


def test_hint_relations_are_those_within_h_hops_of_the_topic():
    from cpr_neo4j.stages.retrieval import RetrievalSettings, Retriever

    graph = InMemoryGraph(
        [
            ("Alien", "directed_by", "Ridley Scott"),
            ("Alien", "has_genre", "Horror"),
            ("Blade Runner", "directed_by", "Ridley Scott"),
            ("Blade Runner", "release_year", "1982"),
            ("Heat", "starred_actors", "Al Pacino"),
        ]
    )

    def rels(hops):
        settings = RetrievalSettings(hops=hops, hint_mode="llm:m", hint_beta=0.5)
        return Retriever(None, "d", None, settings, source=graph).hint_relations(["Ridley Scott"])

    assert rels(1) == ["directed_by"]
    assert rels(2) == ["directed_by", "has_genre", "release_year"]  # never starred_actors


def test_no_hints_and_vllm_missing(monkeypatch):
    assert NoHints().hints("q", RELS, 3) == [] and NoHints.mode == "none"
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # reach the vLLM import
    import builtins

    real_import = builtins.__import__

    def no_vllm(name, *args, **kw):
        if name == "vllm":
            raise ImportError("no vllm")
        return real_import(name, *args, **kw)

    monkeypatch.setattr(builtins, "__import__", no_vllm)
    with pytest.raises(CprError, match="vLLM"):
        llm_hints.VllmHints("Qwen/Qwen3-8B")


class WordScorer:
    """Cosine of bag-of-words vectors; counts calls to check the per-relation cache."""

    def __init__(self):
        self.calls = 0

    def similarity(self, texts_a, texts_b):
        self.calls += 1
        vocab = sorted({w for t in texts_a + texts_b for w in t.split()})

        def vec(t):
            v = np.array([t.split().count(w) for w in vocab], dtype=float)
            return v / np.linalg.norm(v)

        return np.array([[vec(a) @ vec(b) for b in texts_b] for a in texts_a])


def test_hint_bonus_sums_max_similarity_per_step():
    scorer = WordScorer()
    text = {"directed_by": "directed by", "starred_actors": "starred actors"}
    bonus = hint_bonus(scorer, text, [["directed_by"], ["starred_actors", "directed_by"]])
    d, s, g = Step("directed_by", True), Step("starred_actors", False), Step("has_genre", True)
    got = bonus([(s, d), (g,), (d, d)])
    assert got == pytest.approx([2.0, 0.0, 2.0])  # direction is ignored; has genre shares no word
    calls = scorer.calls
    bonus([(d,), (s,)])
    assert scorer.calls == calls  # relations already seen are not embedded again
    assert hint_bonus(scorer, text, [])([(d,)]).tolist() == [0.0]
