"""One hop of relation-sequence expansion, shared by TreeG and open (hop-level) expansion.

A Beam is a DISTINCT relation sequence with the set of entities it reaches, one
predecessor per entity (the smallest id) and that entity's witness chain of ancestors.

Simple-path rule: a step u -> v is taken only if v is not a topic entity and not on u's
witness chain (topic, ..., predecessor of u, u). Only the witness chain is checked, so an
entity reachable only through another, unrecorded chain of the same sequence may be
missed (it needs a cycle inside one relation sequence). The entities a sequence reaches
depend on the sequence alone, never on which other sequences share the frontier.
"""

from __future__ import annotations

from dataclasses import dataclass

from cpr_neo4j.search.base import Edge, RelPath, Step

Child = tuple[RelPath, dict[str, str | None], int]  # (path, end -> predecessor, parent index)


@dataclass
class Beam:
    path: RelPath
    ends: dict[str, str | None]  # end entity -> its predecessor (None only at hop 0)
    chains: dict[str, tuple[str, ...]]  # entity -> its ancestors (topic first)


def root(topics: list[str]) -> Beam:
    """The empty sequence: every topic, no predecessor."""
    return Beam((), dict.fromkeys(topics), {t: () for t in topics})


def frontier_ids(frontier: list[Beam]) -> list[str]:
    """Sorted union of the entities the beams reach: the ids of the hop's one round trip."""
    return sorted(set().union(*(b.ends for b in frontier)))


def expand(frontier: list[Beam], nbrs: dict[str, list[Edge]], topics: set[str]) -> list[Child]:
    """Children (path, end -> predecessor, parent index) of every active sequence."""
    out: list[Child] = []
    for p, beam in enumerate(frontier):
        grouped: dict[Step, dict[str, str]] = {}
        for u in sorted(beam.ends):  # sorted: the smallest predecessor id wins
            banned = beam.chains[u]
            for step, v in nbrs.get(u, ()):
                if v in topics or v == u or v in banned:
                    continue
                grouped.setdefault(step, {}).setdefault(v, u)
        for step in sorted(grouped):
            reached = grouped[step]
            ends: dict[str, str | None] = {v: reached[v] for v in sorted(reached)}
            out.append((beam.path + (step,), ends, p))
    return out


def child_beam(parent: Beam, path: RelPath, ends: dict[str, str | None]) -> Beam:
    """Witness chains only for kept children: most children are dropped by the beam."""
    chains = {v: parent.chains[u] + (u,) for v, u in ends.items() if u is not None}
    return Beam(path, ends, chains)
