"""LLM relation-chain hints for TreeG: the provider protocol and the hint bonus (base.py),
the prompt, cache and LLM clients (llm.py), reply parsing (replies.py), and the local
CPU hint server `cpr llm start` runs (server.py)."""
