"""The path of a real `cpr ask` (and of `cpr --help`) loads none of the heavy stacks: no
torch, transformers or sentence-transformers (the encoder runs on ONNX Runtime, the scorer
on numpy), no scipy.stats, polars or matplotlib. Checked in the process that answered,
after a real MetaQA question was answered with a real every-hop model and calibration."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import cli_env

HEAVY = (
    "torch",
    "transformers",
    "sentence_transformers",
    "scipy.stats",
    "polars",
    "matplotlib",
)

PROBE = """
import sys
from cpr_neo4j.cli.main import cli
code = 0
try:
    cli(sys.argv[1:], prog_name="cpr")
except SystemExit as exc:
    code = exc.code or 0
print("EXIT", code)
print("LOADED", *sorted(m for m in {heavy!r} if m in sys.modules))
print("MODULES", len(sys.modules))
"""


def probe(env: dict | None, *args: str) -> tuple[int, list[str], str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    lines = done.stdout.strip().splitlines()
    tail = {line.split()[0]: line.split()[1:] for line in lines[-3:] if line.strip()}
    assert "LOADED" in tail and "EXIT" in tail, done.stdout + done.stderr
    return int(tail["EXIT"][0]), tail["LOADED"], done.stdout + done.stderr


def test_help_imports_no_heavy_module():
    code, loaded, text = probe(None, "--help")
    print(f"\n`cpr --help`: exit {code}, heavy modules loaded: {loaded or 'none'}")
    assert code == 0 and loaded == [], text


@pytest.mark.neo4j
def test_a_real_ask_imports_no_heavy_module(neo4j_settings, every_hop):
    env = cli_env(neo4j_settings, every_hop.home)
    question = "which movies did [Ridley Scott] direct"
    code, loaded, text = probe(env, "ask", question, "--dataset", "metaqa", "--alpha", "0.3")
    print(f"\n`cpr ask {question!r}`: exit {code}, heavy modules loaded: {loaded or 'none'}")
    assert code == 0, text
    assert "Gladiator" in text and "Guarantee:" in text  # it answered, with its guarantee
    assert loaded == [], f"the ask path imported {loaded}"
