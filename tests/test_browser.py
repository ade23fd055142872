"""Browsing an answer in Neo4j Browser: the link helpers, then the real thing in headless
Chromium (Selenium): log in, open the link `cpr ask` printed, run it, read the result panel.

The browser test needs Debian's `chromium` and `chromium-driver` and Selenium (`.ci/run`
installs them) and the local server `cpr neo4j start` runs; it is skipped without them
unless CPR_REQUIRE_BROWSER=1 (CI), where what it cannot run fails it. It saves its
screenshot to CPR_BROWSER_SCREENSHOT (e.g. docs/browser.png) or under pytest's tmp folder.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from cpr_neo4j.neo4j_server import browser

QUESTION = "which person directed the movies starred by [John Krasinski]"  # `make demo`'s
ALPHA = "0.3"


def _arg(url: str) -> str:
    """What Browser puts in its editor: it decodes the whole URL, then reads `arg`."""
    decoded = urllib.parse.unquote(url.replace("+", " "))
    return "\n".join(re.findall(r"[?&]arg=([^&#]*)", decoded))


def test_ask_link_fills_in_the_connection_and_the_exact_query():
    url = browser.ask_link("http://127.0.0.1:7474", "bolt://127.0.0.1:7687", "0123abcd", "neo4j")
    params = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)
    assert params["dbms"] == ["bolt://neo4j@127.0.0.1:7687"] and params["cmd"] == ["edit"]
    assert _arg(url) == browser.ask_query("0123abcd")
    assert "MATCH (a:Ask {id: '0123abcd'})" in browser.ask_query("0123abcd")
    with pytest.raises(ValueError):
        browser.ask_query("x' OR true //")
    with pytest.raises(ValueError):
        browser.editor_link("http://h:7474", "RETURN '#'")


def test_style_survives_a_link_and_the_server_config():
    command = browser.style_command()
    url = browser.editor_link("http://127.0.0.1:7474", command)
    assert _arg(url) == command  # no '#' or '&' to cut it
    assert json.loads(command.removeprefix(":style ")) == browser.STYLE
    cmds = browser.post_connect_cmd().split(";")  # Browser splits it on ';' (outside quotes)
    assert [":" + c.strip() for c in cmds] == [command, browser.EXACT_PICTURE]
    assert browser.STYLE["node.Ask"]["caption"] == "{name}"


def test_login_hint_is_printed_once_per_home(tmp_path, monkeypatch):
    monkeypatch.setenv("CPR_HOME", str(tmp_path))
    (tmp_path / "neo4j").mkdir()
    (tmp_path / "neo4j" / "credentials.json").write_text(
        json.dumps({"uri": "bolt://127.0.0.1:7687", "http": "http://127.0.0.1:7474"})
    )
    url, hint = browser.local_link("abc123")
    assert url.startswith("http://127.0.0.1:7474/browser/?dbms=bolt://neo4j@127.0.0.1:7687")
    assert "log in as `neo4j`" in hint and "credentials.json" in hint and "run button" in hint
    assert browser.local_link("abc123") == (url, None)


# -- the real browser ---------------------------------------------------------------------


def _chromium() -> tuple[str, str] | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or "/usr/lib/chromium/chromedriver"
    return (found, driver) if found and Path(driver).exists() else None


def _need(what: str) -> None:
    if os.environ.get("CPR_REQUIRE_BROWSER") == "1":
        pytest.fail(f"CPR_REQUIRE_BROWSER=1 but {what}")
    pytest.skip(what)


@pytest.fixture(scope="module")
def chromium() -> tuple[str, str]:
    """(chromium, chromedriver); skips (fails under CPR_REQUIRE_BROWSER=1) before anything
    is trained or asked when either, or Selenium, is missing."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        _need("Selenium is not installed (pip install '.[dev]')")
    found = _chromium()
    if not found:
        _need("chromium and chromium-driver are not installed (apt-get install ...)")
    return found


@pytest.fixture(scope="module")
def asked(chromium, store, metaqa, neo4j_settings, tmp_path_factory, two_hop):
    """`cpr ask` on the demo question under a fresh CPR_HOME (so the login hint comes with
    its first ask): (its output, the Ask id, everything it printed).

    The model: the session's small 2-hop CPR model (its folder linked into the home). Sets
    are never empty (the top-ranked answers are always in), so the view has answers."""
    from tests.conftest import private_home

    if neo4j_settings.source in ("environment", "testcontainers"):
        _need("needs the local server that `cpr neo4j start` runs (its Browser)")
    home = private_home(tmp_path_factory, "cpr_home_browser")
    (home / "models").mkdir()
    model_id = two_hop.model_id
    (home / "models" / model_id).symlink_to(two_hop.home / "models" / model_id)
    env = dict(os.environ, CPR_HOME=str(home), COLUMNS="200")
    cmd = [sys.executable, "-m", "cpr_neo4j", "ask", QUESTION, "--alpha", ALPHA]
    done = subprocess.run(
        [*cmd, "--model", model_id], env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    ask_id = re.search(r"\(:Ask \{id: '(\w+)'\}\)", done.stdout).group(1)
    assert "the set is empty" not in done.stdout
    yield done.stdout, ask_id, done.stdout + done.stderr
    store.write("delete_asks", ids=[ask_id])


def expected_counts(store, ask_id: str) -> tuple[int, int]:
    """Nodes and relationships of the answer paths as recorded: the Ask, its topics and
    answers and every entity on a path; TOPIC + ANSWER + each distinct hop once."""
    from cpr_neo4j.graph import records

    rec = records.ask_record(store, ask_id)
    nodes = set(rec["topics"]) | {a["id"] for a in rec["answers"]}
    hops = set()
    for a in rec["answers"]:
        path = a["nodes"] or []
        nodes |= set(path)
        for u, v, t, f in zip(path, path[1:], a["rels"] or [], a["forward"] or [], strict=False):
            hops.add((u, t, v) if f else (v, t, u))
    assert hops, f"Ask {ask_id} recorded no path"
    return 1 + len(nodes), len(rec["topics"]) + len(rec["answers"]) + len(hops)


class Browser:
    """A headless Chromium on Neo4j Browser."""

    def __init__(self, binary: str, driver: str) -> None:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service

        options = webdriver.ChromeOptions()
        options.binary_location = binary
        for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage"):
            options.add_argument(flag)
        options.add_argument("--window-size=1400,1000")
        self.d = webdriver.Chrome(options=options, service=Service(driver))

    def css(self, selector: str, timeout: float = 120):
        from selenium.webdriver.common.by import By
        from selenium.webdriver.support import expected_conditions as ec
        from selenium.webdriver.support.ui import WebDriverWait

        return WebDriverWait(self.d, timeout).until(
            ec.element_to_be_clickable((By.CSS_SELECTOR, selector))
        )

    def until(self, check, timeout: float = 120):
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        wait = WebDriverWait(self.d, timeout, ignored_exceptions=[StaleElementReferenceException])
        return wait.until(lambda _: check())

    def login(self, password: str) -> dict[str, str]:
        """Fill the password into the connect form; returns what the form came filled with."""
        field = self.css('[data-testid="password"]')
        form = {
            k: self.d.find_element("css selector", f'[data-testid="{k}"]').get_attribute("value")
            for k in ("username", "boltaddress")
        }
        field.send_keys(password)
        self.css('[data-testid="connect"]').click()
        self.until(self.connected)
        return form

    def open(self, url: str, password: str) -> None:
        """Load `url` once logged in: Browser reconnects with the credentials it kept, or,
        when it has not stored them yet, shows the login form again."""
        from selenium.common.exceptions import WebDriverException

        self.d.get(url)

        def ready() -> bool:
            if self.connected():
                return True
            try:
                fields = self.d.find_elements("css selector", '[data-testid="password"]')
                if fields and fields[0].is_displayed():
                    self.login(password)
            except WebDriverException:  # the form went away under us: Browser reconnected
                pass
            return False

        self.until(ready)

    def connected(self) -> bool:
        return "You are connected as user" in self.d.find_element("tag name", "body").text

    def run(self, marker: str) -> None:
        """Press the editor's run button; wait for a frame whose command holds `marker`."""
        self.until(lambda: marker in self.css('[data-testid="activeEditor"]').text)
        self.css('[data-testid="editor-Run"]').click()
        self.until(lambda: any(marker in f.text for f in self.frames()))

    def frames(self) -> list:
        return self.d.find_elements("css selector", '[data-testid="frame"]')

    def result_frame(self, marker: str):
        """The frame whose command holds `marker`, once its result panel reports counts."""

        def ready():
            for frame in self.frames():
                text = frame.text
                if marker in text and "Displaying" in text:
                    return frame
            return None

        return self.until(ready)

    def picture(self, frame) -> dict:
        """The frame's panel text and what its SVG draws (node captions, relationships)."""
        time.sleep(2)  # let the force layout settle before counting and the screenshot
        return self.d.execute_script(
            """const f = arguments[0], text = g => Array.from(g.querySelectorAll('text'))
                 .map(t => t.textContent.trim()).join(' ');
               return {panel: f.innerText.match(/Displaying [^\\n]*/)[0],
                       nodes: Array.from(f.querySelectorAll('svg g.node')).map(text),
                       rels: Array.from(f.querySelectorAll('svg g.relationship')).map(text)};""",
            frame,
        )


@pytest.mark.browser
@pytest.mark.neo4j
def test_the_printed_link_shows_exactly_the_answer_paths(
    chromium, store, asked, neo4j_settings, tmp_path
):
    found = chromium
    out, ask_id, printed = asked
    url = re.search(r"Browse the paths: (\S+)", out).group(1)
    assert "dbms=" in url and "log in as `neo4j`" in printed and "run button" in printed
    nodes, rels = expected_counts(store, ask_id)
    print(f"\nAsk {ask_id}: the answer paths have {nodes} nodes and {rels} relationships")

    shot = Path(os.environ.get("CPR_BROWSER_SCREENSHOT") or tmp_path / "browser.png")
    b = Browser(*found)
    try:
        b.d.get(url)
        form = b.login(neo4j_settings.password)
        assert form["username"] == "neo4j"
        assert form["boltaddress"].endswith(neo4j_settings.uri.rsplit("/", 1)[-1])
        if not _server_applies_style(store):  # installed before the style: do as README says
            for command in (browser.style_command(), browser.EXACT_PICTURE):
                http = url.split("/browser/")[0]
                link = browser.editor_link(http, command, neo4j_settings.uri)
                b.open(link, neo4j_settings.password)
                b.run(command[:20])
            b.open(url, neo4j_settings.password)
        b.run(ask_id)
        frame = b.result_frame(ask_id)
        seen = b.picture(frame)
        print(f"Browser: {seen['panel']} drawn {len(seen['nodes'])} nodes, {len(seen['rels'])}")
        frame.screenshot(str(shot))
        print(f"screenshot: {shot}")
    except Exception:
        b.d.save_screenshot(str(tmp_path / "failure.png"))
        print(f"the page at the failure: {tmp_path / 'failure.png'}")
        raise
    finally:
        b.d.quit()
    assert seen["panel"] == f"Displaying {nodes} nodes, {rels} relationships."
    assert (len(seen["nodes"]), len(seen["rels"])) == (nodes, rels)
    assert QUESTION in [" ".join(c.split()) for c in seen["nodes"]]  # the Ask node's caption


def _server_applies_style(store) -> bool:
    rows = store.query(
        "SHOW SETTINGS YIELD name, value WHERE name = 'browser.post_connect_cmd' RETURN value"
    )[0]
    return bool(rows) and rows[0]["value"] == browser.post_connect_cmd()
