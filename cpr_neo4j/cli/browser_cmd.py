"""`cpr browser-style`: the Neo4j Browser style for Ask records, as commands to paste."""

from __future__ import annotations

import click


@click.command("browser-style")
def browser_style() -> None:
    """Print the Neo4j Browser commands that make Ask records readable (:style, :config)."""
    from cpr_neo4j.neo4j_server.browser import EXACT_PICTURE, style_command

    click.echo(style_command())
    click.echo(EXACT_PICTURE)
    click.echo(
        "# Run each line once in Browser's editor (Browser keeps both): the style, then "
        "'Connect result nodes' off so that only the recorded paths are drawn. The local "
        "server that `cpr neo4j install` sets up runs both at every login.",
        err=True,
    )
