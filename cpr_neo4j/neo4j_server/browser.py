"""Neo4j Browser for Ask records: the shipped style, the link `cpr ask` prints, the login hint.

The style (grass, as JSON so that Browser's `:style` and `browser.post_connect_cmd` both take
it) captions every node with its full `name`: the Ask node shows the question, entities their
names, CVT/mediator entities (label :Mediator) read `CVT`. Roles show on the Ask's edges: a thick
blue `topic` edge to the topic, green `answer RANK` edges to the answers; intermediate entities
have no edge from the Ask.
"""

from __future__ import annotations

import contextlib
import json
import os
import urllib.parse

from cpr_neo4j.config import resource_dir

# Browser's own defaults for `node` and `relationship` come first: `:style` replaces the
# whole style, and an element matching no rule would otherwise have no size or colour.
# No '#' anywhere (colours as rgb()): a link's text ends at '#' (see editor_link).
STYLE: dict[str, dict[str, str]] = {
    "node": {
        "diameter": "50px",
        "color": "rgb(165,171,182)",
        "border-color": "rgb(154,161,172)",
        "border-width": "2px",
        "text-color-internal": "rgb(255,255,255)",
        "font-size": "10px",
    },
    "relationship": {
        "color": "rgb(165,171,182)",
        "shaft-width": "1px",
        "font-size": "8px",
        "padding": "3px",
        "text-color-external": "rgb(0,0,0)",
        "text-color-internal": "rgb(255,255,255)",
        "caption": "<type>",
    },
    "node.Entity": {
        "diameter": "90px",
        "color": "rgb(221,230,240)",
        "border-color": "rgb(143,163,184)",
        "text-color-internal": "rgb(30,42,54)",
        "font-size": "10px",
        "caption": "{name}",
    },
    "node.Mediator": {
        "diameter": "40px",
        "color": "rgb(239,239,239)",
        "border-color": "rgb(176,176,176)",
        "text-color-internal": "rgb(85,85,85)",
        "caption": "CVT",
    },
    "node.Ask": {
        "diameter": "170px",
        "color": "rgb(255,224,129)",
        "border-color": "rgb(201,166,58)",
        "text-color-internal": "rgb(58,46,0)",
        "font-size": "12px",
        "caption": "{name}",
    },
    "relationship.TOPIC": {
        "color": "rgb(47,111,196)",
        "shaft-width": "5px",
        "font-size": "11px",
        "text-color-external": "rgb(47,111,196)",
        "caption": "topic",
    },
    "relationship.ANSWER": {
        "color": "rgb(63,163,77)",
        "shaft-width": "3px",
        "font-size": "11px",
        "text-color-external": "rgb(46,125,50)",
        "caption": "answer {rank}",
    },
}


# "Connect result nodes" (on by default) would draw every relationship between the shown
# entities, not only the recorded hops: off, the picture is exactly what the query returns.
EXACT_PICTURE = ":config autoComplete: false"


def style_command() -> str:
    """The `:style` command that applies STYLE in Browser (one line of JSON)."""
    return ":style " + json.dumps(STYLE, separators=(",", ":"))


def post_connect_cmd() -> str:
    """Value of `browser.post_connect_cmd`: commands Browser runs at login, ';'-separated and
    without their leading ':' (the JSON holds no ';')."""
    return "; ".join(c[1:] for c in (style_command(), EXACT_PICTURE))


def ask_query(ask_id: str) -> str:
    """cypher/ask_paths.cypher for one Ask, parameter-free (the id is a hex uuid), to paste."""
    if not ask_id.isalnum():
        raise ValueError(f"bad Ask id {ask_id!r}")
    # read as graph/cypher.py `statement` reads it (not imported: graph imports this package)
    text = (resource_dir("cypher") / "ask_paths.cypher").read_text()
    return text.split("\n", 1)[1].replace("$id", f"'{ask_id}'").strip()


def editor_link(
    http: str, text: str, bolt_uri: str | None = None, user: str = "neo4j", db: str = "neo4j"
) -> str:
    """Browser link that puts `text` in the editor (cmd=edit) and, given `bolt_uri`, fills
    in the connection (dbms=, db=). Browser decodes the whole URL before it reads `arg` and
    ends it at '&' or '#', so `text` may hold neither."""
    if "&" in text or "#" in text:
        raise ValueError("Browser cuts a link's text at '&' or '#'")
    params = {}
    if bolt_uri:
        scheme, _, host = bolt_uri.partition("://")
        params |= {"dbms": f"{scheme}://{user}@{host}", "db": db}
    params |= {"cmd": "edit", "arg": text}
    query = urllib.parse.urlencode(params, quote_via=urllib.parse.quote, safe=":/@")
    return f"{http.rstrip('/')}/browser/?{query}"


def ask_link(http: str, bolt_uri: str, ask_id: str, user: str = "neo4j", db: str = "neo4j") -> str:
    """The Ask's Browser link: connection filled in, its paths query in the editor."""
    return editor_link(http, ask_query(ask_id), bolt_uri, user, db)


def login_hint(credentials: str, user: str = "neo4j") -> str:
    """How to get from the link to the picture (printed once per CPR_HOME by `cpr ask`)."""
    return (
        f"In Neo4j Browser: log in as `{user}` with the password in {credentials} (the "
        "connection is filled in), then press the run button (the triangle right of the "
        "editor): the query waits there and does not run by itself. The Ask node shows the "
        "question; a blue `topic` edge leads to the topic, green `answer RANK` edges to the "
        "answers, and grey edges are the answers' best paths."
    )


def local_link(ask_id: str) -> tuple[str, str | None]:
    """(link to the Ask on the local server, login hint the first time in this CPR_HOME)."""
    from cpr_neo4j.config import credentials_file, local_server_settings
    from cpr_neo4j.errors import CprError

    local = local_server_settings()
    if not local:
        raise CprError("no local Neo4j server: run `cpr neo4j install`")
    user = local.get("username", "neo4j")
    db = os.environ.get("NEO4J_DATABASE", "neo4j")
    url = ask_link(local["http"], local["uri"], ask_id, user, db)
    shown = credentials_file().with_name("browser-hint-shown")
    if shown.exists():
        return url, None
    with contextlib.suppress(OSError):
        shown.touch()
    return url, login_hint(str(credentials_file()), user)
