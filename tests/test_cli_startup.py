"""The CLI starts without the heavy stacks: commands are imported only when invoked."""

from __future__ import annotations

import subprocess
import sys

import click

HEAVY = ("torch", "scipy", "polars", "matplotlib", "sentence_transformers", "neo4j", "fastapi")

PROBE = """
import sys
from cpr_neo4j.cli.main import cli
try:
    cli(sys.argv[1:], prog_name="cpr")
except SystemExit:
    pass
print("LOADED", *sorted(m for m in {heavy!r} if m in sys.modules))
"""


def loaded_by(*args: str) -> tuple[list[str], str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(heavy=HEAVY), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("LOADED"), out.stdout + out.stderr
    return last.split()[1:], out.stdout + out.stderr


def test_help_imports_no_heavy_module_and_lists_every_command():
    loaded, text = loaded_by("--help")
    assert loaded == []
    for name in ("ask", "calibrate", "eval", "ingest", "neo4j", "serve", "train"):
        assert f"\n  {name} " in text


def test_ask_usage_errors_import_no_heavy_module():
    for args in (["ask"], ["ask", "q", "--alpha", "2"], ["ask", "--help"]):
        loaded, text = loaded_by(*args)
        assert loaded == [], (args, text)


def test_help_text_matches_the_commands_own():
    from cpr_neo4j.cli.main import COMMANDS, cli

    ctx = click.Context(cli)
    formatter = ctx.make_formatter()
    cli.format_commands(ctx, formatter)
    listed = formatter.getvalue()
    limit = formatter.width - 6 - max(len(n) for n in COMMANDS)
    for name in COMMANDS:
        short = cli.get_command(ctx, name).get_short_help_str(limit)
        assert short in listed, (name, short)
