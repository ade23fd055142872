"""Paraphrase generated questions through an OpenAI-compatible chat server (`--llm-url`).

One request per question, temperature 0, JSON reply `{"question": "..."}`. A reply is kept
only when it is a non-empty string that still names the topic entity (masking needs the
mention) and has at least two words beside it; anything else (no server, bad JSON, a
dropped name, the bare name) keeps the template wording, and the counts say how many were
rewritten.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from cpr_neo4j.hints.base import DEFAULT_LLM_MODEL
from cpr_neo4j.training.generate import Generated

SYSTEM = (
    "You rewrite questions about a knowledge graph into natural English. Keep the entity "
    'name exactly as written. Reply with JSON only: {"question": "..."}.'
)


@dataclass
class ParaphraseStats:
    asked: int = 0
    rewritten: int = 0
    failed: int = 0  # no reply, a bad reply, or the name dropped: template wording kept


def messages(g: Generated) -> list[dict[str, str]]:
    user = f"Entity: {g.topic_name}\nQuestion: {g.text}\nRewrite the question."
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def endpoint(url: str) -> str:
    base = url.rstrip("/")
    return base + ("/chat/completions" if base.endswith("/v1") else "/v1/chat/completions")


def accept(g: Generated, content: object) -> str | None:
    """The rewritten text, or None when the reply is unusable."""
    if not isinstance(content, str):
        return None
    try:
        text = json.loads(content).get("question")
    except (ValueError, AttributeError):
        return None
    if not isinstance(text, str) or not text.strip():
        return None
    text = " ".join(text.split())
    if g.topic_name.lower() not in text.lower():
        return None
    # a small model sometimes answers with the bare name, which asks nothing
    rest = text.lower().replace(g.topic_name.lower(), " ").split()
    return text if len(rest) >= 2 else None


class Paraphraser:
    def __init__(self, url: str, model: str | None = None, timeout: float = 30.0):
        self.endpoint = endpoint(url)
        self.model = model or DEFAULT_LLM_MODEL
        self.timeout = timeout
        self.stats = ParaphraseStats()

    def one(self, g: Generated) -> Generated:
        import requests  # only with a server

        self.stats.asked += 1
        payload = {
            "model": self.model,
            "messages": messages(g),
            "temperature": 0,
            "max_tokens": 96,
            "response_format": {"type": "json_object"},
            "chat_template_kwargs": {"enable_thinking": False},
        }
        try:
            resp = requests.post(self.endpoint, json=payload, timeout=self.timeout)
            resp.raise_for_status()
            text = accept(g, resp.json()["choices"][0]["message"]["content"])
        except (requests.RequestException, ValueError, KeyError, IndexError, TypeError):
            text = None
        if text is None:
            self.stats.failed += 1
            return g
        self.stats.rewritten += 1
        return replace(g, text=text)

    def __call__(self, questions: list[Generated]) -> list[Generated]:
        return [self.one(g) for g in questions]
