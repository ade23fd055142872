"""LLM hint providers: the prompt, the reply cache, and the OpenAI-schema and in-process
vLLM clients.

A reply with no chains list gets one corrective follow-up; still none, or a server that
fails after one retry, is a HintFailed error: silently scoring without hints would not be
what was calibrated. Usable replies are cached per (model, prompt version, question,
relations, hops) in a JSON Lines file, so calibration and evaluation see identical hints
(the guarantee needs them fixed) and a repeated prompt never costs a second call.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from cpr_neo4j.errors import CprError, HintFailed
from cpr_neo4j.hints.base import MAX_CHAINS, PROMPT_VERSION, HintStats
from cpr_neo4j.hints.replies import checked_chains, parse_reply

ATTEMPTS = 2  # one retry for a flaky server; a dead one fails in 2 x timeout + RETRY_WAIT
RETRY_WAIT = 0.5
_STATS_LOCK = threading.Lock()

_SYSTEM = (
    "You plan relation paths over a knowledge graph. Reply with one JSON object and "
    'nothing else, exactly of the form {"chains": [["relation", ...], ...]}.'
)
_EXAMPLE_Q = (
    "Question: which films did the director of ENT make?\n"
    "Relations around ENT: directed_by, starred_actors, release_year, has_genre\n"
    "Give up to 4 chains of 1 to 2 relations, using only these relation names, that lead "
    "from ENT to the answer."
)
_EXAMPLE_A = '{"chains": [["directed_by", "directed_by"]]}'
_REPAIR = (
    'That is not of the form {"chains": [["relation", ...], ...]}. Reply again with only '
    "that JSON object, using only the relation names listed."
)


Key = tuple[str, str, str, tuple[str, ...], int]  # model, prompt, question, relations, hops


class HintCache:
    """Usable raw replies by (model, prompt version, question, relations, hops), one JSON
    object per line; later lines win. Thread-safe: prefetch fills it from a pool."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self._mem: dict[Key, str] = {}
        self._lock = threading.Lock()
        if self.path and self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    if isinstance(row["reply"], str):
                        self._mem[self._key(row)] = row["reply"]
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line from an interrupted run, or an old format

    @staticmethod
    def _key(row: Mapping[str, Any]) -> Key:
        rels = tuple(sorted(row["relations"]))
        return (row["model"], row["prompt"], row["question"], rels, int(row["hops"]))

    def __len__(self) -> int:
        return len(self._mem)

    def get(self, key: Key) -> str | None:
        return self._mem.get(key)

    def put(self, key: Key, reply: str) -> None:
        model, prompt, question, rels, hops = key
        row = {"model": model, "prompt": prompt, "question": question}
        row |= {"relations": list(rels), "hops": hops, "reply": reply}
        with self._lock:
            self._mem[key] = reply
            if self.path:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(json.dumps(row, ensure_ascii=False) + "\n")


def build_messages(question: str, relations: list[str], hops: int) -> list[dict[str, str]]:
    """A one-shot strict-JSON prompt listing the relations around the topic entity."""
    user = (
        f"Question: {question}\nRelations around ENT: {', '.join(relations)}\n"
        f"Give up to {MAX_CHAINS} chains of 1 to {hops} relations, using only these relation "
        "names, that lead from ENT to the answer."
    )
    return [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": _EXAMPLE_Q},
        {"role": "assistant", "content": _EXAMPLE_A},
        {"role": "user", "content": user},
    ]


class _LLMHints:
    """Cache lookup, batching, failure handling and parsing shared by the LLM providers."""

    model: str
    cache: HintCache
    stats: HintStats
    prompt = PROMPT_VERSION
    parallel = 1  # requests in flight at once during prefetch

    @property
    def mode(self) -> str:
        return f"llm:{self.model}"

    def _complete(self, messages: list[dict[str, str]]) -> str:
        raise NotImplementedError

    def _fill(self, todo: dict[Key, list[dict[str, str]]]) -> None:
        """Ask for every prompt, `parallel` requests at once (a server batches them), caching
        each usable reply as it arrives: a run stopped halfway keeps what it was sent."""

        def one(item: tuple[Key, list[dict[str, str]]]) -> None:
            key, messages = item
            self._usable(messages, self._ask(messages), key)

        with ThreadPoolExecutor(max(1, self.parallel)) as pool:
            list(pool.map(one, todo.items()))

    def _key(self, question: str, relations: list[str], hops: int) -> Key:
        return (self.model, self.prompt, question, tuple(sorted(relations)), hops)

    def hints(self, question: str, relations: list[str], hops: int) -> list[list[str]]:
        key = self._key(question, relations, hops)
        reply = self.cache.get(key)
        if reply is None:
            messages = build_messages(question, sorted(relations), hops)
            reply = self._usable(messages, self._ask(messages), key)
        else:
            self.stats.cached += 1
        return self._chains(reply, relations, hops)

    def prefetch(self, items: Sequence[tuple[str, list[str], int]]) -> None:
        """Fill the cache for many questions in one batch; HintFailed if any fails."""
        todo = {}
        for question, relations, hops in items:
            key = self._key(question, relations, hops)
            if self.cache.get(key) is None:
                todo.setdefault(key, build_messages(question, sorted(relations), hops))
        if todo:
            self._fill(todo)

    def _usable(self, messages: list[dict[str, str]], reply: str, key: Key) -> str:
        """The reply, or after one corrective follow-up a reply with a chains list; cached."""
        rels, hops = list(key[3]), key[4]
        try:
            parse_reply(reply, rels, hops)
        except HintFailed:
            self.stats.repaired += 1
            follow = [
                *messages,
                {"role": "assistant", "content": reply},
                {"role": "user", "content": _REPAIR},
            ]
            reply = self._ask(follow)
            parse_reply(reply, rels, hops)  # still none: HintFailed, and nothing is cached
        self.cache.put(key, reply)
        return reply

    def _chains(self, reply: str, relations: list[str], hops: int) -> list[list[str]]:
        chains, dropped = checked_chains(reply, relations, hops)
        self.stats.dropped += dropped
        return chains

    def _ask(self, messages: list[dict[str, str]]) -> str:
        """The reply text; one retry, then HintFailed (a one-line message)."""
        for attempt in range(ATTEMPTS):
            start = time.perf_counter()
            try:
                return self._complete(messages)
            except Exception as exc:  # timeouts, refused connections, HTTP errors, bad JSON
                if attempt + 1 == ATTEMPTS:
                    raise HintFailed(
                        f"the hint LLM {self.model} failed {ATTEMPTS} times "
                        f"({type(exc).__name__}: {' '.join(str(exc).split())[:120]}): start "
                        "the server, or calibrate and ask without hints"
                    ) from exc
                time.sleep(RETRY_WAIT)
            finally:
                with _STATS_LOCK:  # prefetch calls from a thread pool
                    self.stats.asked += 1
                    self.stats.seconds += time.perf_counter() - start
        raise AssertionError("unreachable")


class OpenAIHints(_LLMHints):
    """Any OpenAI chat-completions server (vLLM serve, llama.cpp server, ...)."""

    def __init__(
        self,
        url: str,
        model: str,
        timeout: float = 30.0,
        cache_path: str | Path | None = None,
        api_key: str | None = None,
        parallel: int = 1,
        max_tokens: int = 256,
    ):
        base = url.rstrip("/")
        self.endpoint = base + (
            "/chat/completions" if base.endswith("/v1") else "/v1/chat/completions"
        )
        self.url = url
        self.model = model
        self.timeout = timeout
        self.parallel = parallel
        self.max_tokens = max_tokens
        self.cache = HintCache(cache_path)
        self.stats = HintStats()
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def _complete(self, messages: list[dict[str, str]]) -> str:
        payload = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": self.max_tokens,
            "response_format": {"type": "json_object"},
            "chat_template_kwargs": {"enable_thinking": False},  # Qwen3: no <think> block
        }
        import requests  # only with an LLM server: `cpr ask` without hints never loads it

        resp = requests.post(
            self.endpoint, json=payload, headers=self._headers, timeout=self.timeout
        )
        resp.raise_for_status()
        content = resp.json()["choices"][0]["message"]["content"]
        if not isinstance(content, str):
            raise ValueError("reply has no text content")
        return content


class VllmHints(_LLMHints):
    """In-process vLLM (optional extra `llm`; needs a GPU). Prefetch is one vLLM batch."""

    def __init__(self, model: str, cache_path: str | Path | None = None, **llm_kwargs: Any):
        import torch  # a dependency anyway; checked first so a CPU machine fails in a second

        if not torch.cuda.is_available():
            raise CprError(
                "in-process vLLM hints (--llm vllm:MODEL) need a CUDA GPU; on this machine "
                "serve a model and use --llm-url (e.g. `cpr llm start`)"
            )
        try:
            import vllm  # lazy: a 9 GB optional dependency
        except ImportError as exc:
            raise CprError(
                "in-process hints need vLLM: pip install 'cpr-neo4j[llm]' "
                "(or serve the model and use --llm-url)"
            ) from exc
        self.model = model
        self.cache = HintCache(cache_path)
        self.stats = HintStats()
        self._llm = vllm.LLM(model=model, **llm_kwargs)
        self._params = vllm.SamplingParams(temperature=0.0, max_tokens=256)
        self._template = {"enable_thinking": False}  # Qwen3: no <think> block

    def _complete(self, messages: list[dict[str, str]]) -> str:
        out = self._llm.chat(
            [messages], self._params, use_tqdm=False, chat_template_kwargs=self._template
        )
        return out[0].outputs[0].text

    def _fill(self, todo: dict[Key, list[dict[str, str]]]) -> None:
        """One vLLM batch for every prompt; the replies are cached once it returns."""
        batch = list(todo.values())
        start = time.perf_counter()
        try:
            outs = self._llm.chat(
                batch, self._params, use_tqdm=False, chat_template_kwargs=self._template
            )
        except Exception as exc:  # an in-process engine failure: no retry helps
            shown = " ".join(str(exc).split())[:160]
            raise HintFailed(f"vLLM failed on a batch of {len(batch)} prompts: {shown}") from exc
        self.stats.asked += len(batch)
        self.stats.seconds += time.perf_counter() - start
        for (key, messages), out in zip(todo.items(), outs, strict=True):
            self._usable(messages, out.outputs[0].text, key)
