"""`cpr serve --workers N`: N server processes behind one port (uvicorn's workers).

Each worker is a process of its own that shares nothing with the others but Neo4j: its own
driver, scorers, entity index and neighbour rows. uvicorn starts workers from an import
string, so the options travel to them in one environment variable, and each builds its
app here. Across machines, run `cpr serve` on each against one Neo4j server or cluster
(NEO4J_URI=neo4j://HOST: the routing scheme) behind any HTTP load balancer.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from fastapi import FastAPI

if TYPE_CHECKING:
    from cpr_neo4j.hints.base import HintProvider

OPTIONS_ENV = "CPR_SERVE_OPTIONS"  # JSON: create_app's options, set by `cpr serve`


def app_from_environment(hints: HintProvider | None = None) -> FastAPI:
    """The app of one worker, from the options `cpr serve` put in $CPR_SERVE_OPTIONS;
    hints: the provider already built from them (one process), else built here."""
    from cpr_neo4j.model.threads import set_threads
    from cpr_neo4j.serve.app import create_app
    from cpr_neo4j.serve.auth import TOKEN_ENV
    from cpr_neo4j.stages.retrieval import hints_from

    o = json.loads(os.environ[OPTIONS_ENV])
    set_threads(o["threads"])
    if hints is None:
        args = (o["llm_url"], o["llm_model"], o["llm"], o["llm_parallel"], o["llm_timeout"])
        hints = hints_from(*args)
    return create_app(
        token=os.environ.get(TOKEN_ENV) or None,
        scorers_per_model=o["scorers"],
        warm=o["warm"],
        hints=hints,
        batch_searches=o["batch"],
        preload=o["preload"],
        keepalive_requests=o.get("keepalive"),
    )
