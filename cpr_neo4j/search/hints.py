"""LLM relation-chain hints and the hint bonus they give TreeG.

A HintProvider proposes up to 4 relation chains (1..H relation names from an allowed list)
for a question. Chains naming relations that do not exist (or too many) are dropped with
a warning; a reply with no chains list at all, or a server that fails after one retry, is
a HintFailed error: silently scoring without hints would not be what was calibrated.
Parsed replies are cached per (model, question) in a JSON Lines file so calibration and
evaluation see identical hints (the guarantee needs them fixed).

Hint-adjusted cost: V'(p) = V(p) - beta * sum over steps r in p of max_h s(r, h), h over
the hinted relations. Hints name relations without a direction, so the similarity
compares the step's relation text with the hinted relation's text (direction ignored).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import requests

from cpr_neo4j.errors import CprError, HintFailed
from cpr_neo4j.search.base import RelPath
from cpr_neo4j.text import readable_relation

log = logging.getLogger(__name__)

MAX_CHAINS = 4
ATTEMPTS = 2  # one retry for a flaky server; a dead one fails in 2 x timeout + RETRY_WAIT
RETRY_WAIT = 0.5

_SYSTEM = (
    "You plan relation paths over a knowledge graph. Reply with one JSON object and "
    'nothing else, exactly of the form {"chains": [["relation", ...], ...]}.'
)
_EXAMPLE_Q = (
    "Question: which films did the director of [Alien] make?\n"
    "Allowed relations: directed_by, starred_actors, release_year, has_genre\n"
    "Give up to 4 chains of 1 to 2 relations, using only allowed relation names, that lead "
    "from the topic entity in brackets to the answer."
)
_EXAMPLE_A = '{"chains": [["directed_by", "directed_by"]]}'


class HintProvider(Protocol):
    mode: str  # pinned in the calibration record: "none" or "llm:<model>"

    def hints(self, question: str, relations: list[str], hops: int) -> list[list[str]]: ...


class NoHints:
    mode = "none"

    def hints(self, question: str, relations: list[str], hops: int) -> list[list[str]]:
        return []


def parse_chains(
    reply: str, relations: list[str], hops: int, max_chains: int = MAX_CHAINS
) -> list[list[str]]:
    """Valid chains from an LLM reply; malformed parts are dropped with a warning, and a
    reply without a chains list is a HintFailed error.

    Accepted: {"chains": [...]} or a bare list; a string item counts as a one-relation
    chain (small models mix both). Relation names match case-insensitively and ignore a
    leading "~". A chain with any invented relation, a non-string item, or more than
    `hops` relations is dropped whole (a partial chain would mean another path).
    """
    data = _loads(reply)
    if isinstance(data, dict):
        data = data.get("chains")
    if not isinstance(data, list):
        shown = " ".join(reply.split())[:120]
        raise HintFailed(f"the hint LLM's reply has no chains list: {shown!r}")
    allowed = {r.lower(): r for r in relations}
    chains: list[list[str]] = []
    dropped = 0
    for item in data:
        raw = [item] if isinstance(item, str) else item
        if not isinstance(raw, list) or not raw or not all(isinstance(r, str) for r in raw):
            dropped += 1
            continue
        names = [allowed.get(r.strip().lstrip("~").lower()) for r in raw]
        if None in names or len(names) > hops:
            dropped += 1
            continue
        if names not in chains:
            chains.append(names)  # type: ignore[arg-type]
    if dropped:
        log.warning("dropped %d malformed/invented/too-long hint chain(s)", dropped)
    if len(chains) > max_chains:
        log.warning("hint reply had %d chains; keeping the first %d", len(chains), max_chains)
    return chains[:max_chains]


def _loads(reply: str) -> Any:
    text = re.sub(r"<think>.*?</think>", "", reply, flags=re.DOTALL).strip()
    text = re.sub(r"^```(?:json)?\s*|\s*```$", "", text)
    try:
        return json.loads(text)
    except ValueError:
        pass
    start, end = text.find("{"), text.rfind("}")  # JSON wrapped in prose
    if 0 <= start < end:
        try:
            return json.loads(text[start : end + 1])
        except ValueError:
            pass
    return None


class HintCache:
    """Raw replies by (model, question), one JSON object per line; later lines win."""

    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path else None
        self._mem: dict[tuple[str, str], str] = {}
        if self.path and self.path.exists():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    if isinstance(row["reply"], str):
                        self._mem[(row["model"], row["question"])] = row["reply"]
                except (ValueError, KeyError, TypeError):
                    continue  # a torn last line from an interrupted run

    def get(self, model: str, question: str) -> str | None:
        return self._mem.get((model, question))

    def put(self, model: str, question: str, reply: str) -> None:
        self._mem[(model, question)] = reply
        if self.path:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            row = {"model": model, "question": question, "reply": reply}
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(row, ensure_ascii=False) + "\n")


def build_messages(question: str, relations: list[str], hops: int) -> list[dict[str, str]]:
    """A one-shot strict-JSON prompt listing the allowed relations."""
    user = (
        f"Question: {question}\nAllowed relations: {', '.join(relations)}\n"
        f"Give up to {MAX_CHAINS} chains of 1 to {hops} relations, using only allowed "
        "relation names, that lead from the topic entity in brackets to the answer."
    )
    return [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": _EXAMPLE_Q},
        {"role": "assistant", "content": _EXAMPLE_A},
        {"role": "user", "content": user},
    ]


class _LLMHints:
    """Cache lookup, failure handling and parsing shared by the LLM providers."""

    model: str
    cache: HintCache

    @property
    def mode(self) -> str:
        return f"llm:{self.model}"

    def _complete(self, messages: list[dict[str, str]]) -> str:
        raise NotImplementedError

    def hints(self, question: str, relations: list[str], hops: int) -> list[list[str]]:
        reply = self.cache.get(self.model, question)
        if reply is not None:
            return parse_chains(reply, relations, hops)
        reply = self._ask(build_messages(question, relations, hops))
        chains = parse_chains(reply, relations, hops)
        self.cache.put(self.model, question, reply)  # only usable replies are cached
        return chains

    def _ask(self, messages: list[dict[str, str]]) -> str:
        """The reply text; one retry, then HintFailed (a one-line message)."""
        for attempt in range(ATTEMPTS):
            try:
                return self._complete(messages)
            except Exception as exc:  # timeouts, refused connections, HTTP errors, bad JSON
                if attempt + 1 == ATTEMPTS:
                    raise HintFailed(
                        f"the hint LLM {self.model} failed {ATTEMPTS} times "
                        f"({type(exc).__name__}: {str(exc)[:120]}): start the server, or "
                        "calibrate and ask without hints"
                    ) from exc
                time.sleep(RETRY_WAIT)
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
    ):
        base = url.rstrip("/")
        self.endpoint = base + (
            "/chat/completions" if base.endswith("/v1") else "/v1/chat/completions"
        )
        self.model = model
        self.timeout = timeout
        self.cache = HintCache(cache_path)
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}

    def _complete(self, messages: list[dict[str, str]]) -> str:
        payload = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": 256,
            "response_format": {"type": "json_object"},
            "chat_template_kwargs": {"enable_thinking": False},  # Qwen3: no <think> block
        }
        resp = requests.post(
            self.endpoint, json=payload, headers=self._headers, timeout=self.timeout
        )
        resp.raise_for_status()
        content = resp.json()["choices"][0]["message"]["content"]
        if not isinstance(content, str):
            raise ValueError("reply has no text content")
        return content


class VllmHints(_LLMHints):
    """In-process vLLM (optional extra `llm`; needs a GPU)."""

    def __init__(self, model: str, cache_path: str | Path | None = None, **llm_kwargs: Any):
        try:
            import vllm  # lazy: a 9 GB optional dependency
        except ImportError as exc:
            raise CprError(
                "in-process hints need vLLM: pip install 'cpr-neo4j[llm]' "
                "(or serve the model and use --llm-url)"
            ) from exc
        import torch  # after vllm: a missing extra fails fast, without loading torch

        if not torch.cuda.is_available():
            raise CprError("in-process vLLM hints need a CUDA GPU; use --llm-url instead")
        self.model = model
        self.cache = HintCache(cache_path)
        self._llm = vllm.LLM(model=model, **llm_kwargs)
        self._params = vllm.SamplingParams(temperature=0.0, max_tokens=256)

    def _complete(self, messages: list[dict[str, str]]) -> str:
        out = self._llm.chat(
            messages, self._params, use_tqdm=False, chat_template_kwargs={"enable_thinking": False}
        )
        return out[0].outputs[0].text


def hint_bonus(
    scorer: Any, relation_text: Mapping[str, str], chains: list[list[str]]
) -> Callable[[list[RelPath]], np.ndarray]:
    """bonus(p) = sum over steps of max cosine between the step's relation and any hint.

    `scorer` needs only `similarity(texts_a, texts_b)`. Per-relation maxima are cached,
    so each relation is embedded once per question.
    """
    hinted = list(dict.fromkeys(r for chain in chains for r in chain))
    hint_texts = [relation_text.get(r) or readable_relation(r) for r in hinted]
    best: dict[str, float] = {}

    def bonus(paths: list[RelPath]) -> np.ndarray:
        if not hint_texts:
            return np.zeros(len(paths))
        new = sorted({s.relation for p in paths for s in p} - best.keys())
        if new:
            texts = [relation_text.get(r) or readable_relation(r) for r in new]
            sims = np.asarray(scorer.similarity(texts, hint_texts), dtype=float)
            best.update(zip(new, sims.max(axis=1).tolist(), strict=True))
        return np.array([sum(best[s.relation] for s in p) for p in paths], dtype=float)

    return bonus
