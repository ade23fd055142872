"""`cpr`: the command line. Expected failures print one line and exit non-zero."""

from __future__ import annotations

import sys

import click
from neo4j.exceptions import Neo4jError, ServiceUnavailable, SessionExpired

from cpr_neo4j.errors import CprError


class FriendlyGroup(click.Group):
    """Turns expected errors into a one-line message and an exit code, never a traceback."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except CprError as exc:
            click.secho(f"error: {exc}", fg="red", err=True)
            sys.exit(exc.exit_code)
        except (ServiceUnavailable, SessionExpired) as exc:
            click.secho(
                f"error: lost the connection to Neo4j ({exc.__class__.__name__}); "
                "check `cpr neo4j status` and retry (writes are idempotent)",
                fg="red",
                err=True,
            )
            sys.exit(2)
        except Neo4jError as exc:
            click.secho(
                f"error: Neo4j refused a statement: {exc.code}: {exc.message}", fg="red", err=True
            )
            sys.exit(2)
        except KeyboardInterrupt:
            click.secho("interrupted; re-run the same command to resume", fg="yellow", err=True)
            sys.exit(130)


@click.group(cls=FriendlyGroup)
@click.version_option(package_name="cpr-neo4j")
def cli() -> None:
    """Conformal Path Reasoning over a Neo4j knowledge graph."""


def _register() -> None:
    from cpr_neo4j.cli import neo4j_cmd

    cli.add_command(neo4j_cmd.neo4j)
    for module, names in (
        ("ingest_cmd", ["ingest"]),
        ("train_cmd", ["train"]),
        ("calibrate_cmd", ["calibrate"]),
        ("ask_cmd", ["ask"]),
        ("eval_cmd", ["eval_"]),
    ):
        try:
            mod = __import__(f"cpr_neo4j.cli.{module}", fromlist=names)
        except ModuleNotFoundError as exc:
            if exc.name != f"cpr_neo4j.cli.{module}":
                raise
            continue
        for name in names:
            cli.add_command(getattr(mod, name))


_register()


def main() -> None:
    cli(prog_name="cpr")
