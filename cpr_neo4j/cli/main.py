"""`cpr`: the command line. Expected failures print one line and exit non-zero.

Commands are imported only when invoked: the stages pull in torch, scipy and the Neo4j
driver (seconds), which `cpr --help` or `cpr neo4j status` should not pay for.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import sys

import click

from cpr_neo4j.errors import CprError

# command name -> (module under cpr_neo4j.cli, attribute holding the click command)
COMMANDS: dict[str, tuple[str, str]] = {
    "neo4j": ("neo4j_cmd", "neo4j"),
    "ingest": ("ingest_cmd", "ingest"),
    "drop": ("drop_cmd", "drop"),
    "train": ("train_cmd", "train"),
    "calibrate": ("calibrate_cmd", "calibrate"),
    "label": ("label_cmd", "label"),
    "generate": ("generate_cmd", "generate"),
    "ask": ("ask_cmd", "ask"),
    "use": ("use_cmd", "use"),
    "eval": ("eval_cmd", "eval_"),
    "serve": ("serve_cmd", "serve"),
    "browser-style": ("browser_cmd", "browser_style"),
    "llm": ("llm_cmd", "llm"),
}


def _neo4j_message(exc: BaseException) -> str | None:
    """The one-line message for a driver error, or None for anything else.

    The driver is imported only if already loaded: an exception from it implies it is."""
    if "neo4j" not in sys.modules:
        return None
    from neo4j.exceptions import Neo4jError, ServiceUnavailable, SessionExpired

    if isinstance(exc, (ServiceUnavailable, SessionExpired)):
        return (
            f"lost the connection to Neo4j ({exc.__class__.__name__}); "
            "check `cpr neo4j status` and retry (writes are idempotent)"
        )
    if isinstance(exc, Neo4jError):
        return f"Neo4j refused a statement: {exc.code}: {exc.message}"
    return None


def _docstring(module: str, attr: str) -> str:
    """The command function's docstring, read from source without importing the module."""
    spec = importlib.util.find_spec(f"cpr_neo4j.cli.{module}")
    if spec is None or not spec.origin:
        return ""
    with open(spec.origin, encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == attr:
            return ast.get_docstring(node) or ""
    return ""


class FriendlyGroup(click.Group):
    """Loads commands lazily and turns expected errors into one line and an exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        present = {
            name
            for name, (module, _) in COMMANDS.items()
            if importlib.util.find_spec(f"cpr_neo4j.cli.{module}") is not None
        }
        return sorted(present | set(self.commands))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.commands or name not in COMMANDS:
            return super().get_command(ctx, name)
        module, attr = COMMANDS[name]
        try:
            mod = importlib.import_module(f"cpr_neo4j.cli.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"cpr_neo4j.cli.{module}":
                raise
            return None
        return getattr(mod, attr)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Like click's, but short help comes from the docstrings: no command is imported."""
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(n) for n in names)
        rows = []
        for name in names:
            if name in COMMANDS:
                stub = click.Command(name, help=_docstring(*COMMANDS[name]))
                short = stub.get_short_help_str(limit)
            else:
                short = self.commands[name].get_short_help_str(limit)
            rows.append((name, short))
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except CprError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(exc.exit_code)
        except KeyboardInterrupt:
            click.secho("interrupted; re-run the same command to resume", fg="yellow", err=True)
            sys.exit(130)
        except Exception as exc:
            message = _neo4j_message(exc)
            if message is None:
                raise
            click.secho(f"error: {message}", fg="red", err=True)
            sys.exit(2)


@click.group(cls=FriendlyGroup)
@click.version_option(package_name="cpr-neo4j")
def cli() -> None:
    """Conformal Path Reasoning over a Neo4j knowledge graph."""


def main() -> None:
    cli(prog_name="cpr")
