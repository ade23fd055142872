"""Issue 57's "Must show": the whole path of a new user with a graph of their own and no
labelled questions, through the real `cpr` commands, recorded as a markdown transcript.

    python experiments/own_graph.py --out docs/own-graph.md [--source triples|neo4j]

Against the local Neo4j of the current CPR_HOME (or NEO4J_URI & co.), each source:

- triples: MetaQA's KB (data/metaqa) written as a bare triples file ->
  `cpr ingest mygraph --triples` -> `cpr ask` (no guarantee) -> `cpr train` on generated
  questions alone (small) -> `cpr label` on 60 plain MetaQA test questions, driven in tmux
  as a person -> `cpr ingest --questions` -> `cpr train` (small: 59 labels calibrate) ->
  `cpr calibrate` -> `cpr ask --alpha 0.1` (with its guarantee);
- neo4j: the same KB as a user's property graph ((:Movie {title})-[:DIRECTED_BY]->
  (:Person {name}), tests/user_graphs.py) -> `cpr ingest mygraph-pg --from-neo4j` -> the
  same steps, and the user's nodes and relationships compared before and after.

The "person" labelling in tmux knows MetaQA's gold answers: per question it reads the
candidates off the screen, asks for more pages (m) until every gold answer is shown or none
is left, marks the candidates whose names are gold answers, and types `a NAME` (a gold
answer) when the graph's candidates hold none; it skips nothing. Every command's stdout and
stderr are recorded verbatim (long ones trimmed, marked "[... N lines ...]"). Each run
replaces its source's section of --out and keeps the other's.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

DATA = ROOT / "data" / "metaqa"
GRAPH = "UserMovies"  # the marker label of the user's property graph (tests/user_graphs.py)
PG_LABELS = "Movie,Person,Genre,Tag,Language,Year,Rating,Votes"
PG_NAMES = ["Year=value", "Rating=value", "Votes=value"]
QUESTIONS = 60  # half 1-hop, half 2-hop MetaQA test questions
SEED = 0
ASKS = ("which movies did Ridley Scott direct", "who directed the films that Tom Hanks acted in")
# the asks' right answers, read off the KB: (topic, relation path), steps as (relation, forward)
ASK_GOLD = {
    ASKS[0]: ("Ridley Scott", [("directed_by", False)]),
    ASKS[1]: ("Tom Hanks", [("starred_actors", False), ("directed_by", True)]),
}
# small trainings: a few minutes each on a loaded 2-core machine
PRE_TRAIN = ["--generated", "100", "--rollouts", "4", "--epochs", "1", "--seed", "1"]
TRAIN = ["--generated", "100", "--rollouts", "4", "--epochs", "1", "--seed", "1"]
HEAD, TAIL = 60, 20  # lines kept of a long output
TABLE_HEAD, TABLE_TAIL = 20, 4  # rows kept of a long table
BOX = set("┏┃┡│└╇━┗┣┠")
COLUMNS = "140"  # the terminal width rich lays tables out for
TMUX_SOCKET = "cpr-own-graph"


@dataclass
class Source:
    key: str  # triples | neo4j
    dataset: str
    title: str


SOURCES = {
    "triples": Source(key="triples", dataset="mygraph", title="A bare triples file"),
    "neo4j": Source(key="neo4j", dataset="mygraph-pg", title="A property graph in Neo4j"),
}


@dataclass
class Step:
    shown: str  # the command as a user types it
    rc: int
    seconds: float
    output: str


@dataclass
class Labelled:
    question: str
    hops: int
    gold: int  # gold answers
    wait: float  # from the previous reply to this question's prompt (the tool's search)
    candidates: int
    pages: int
    marked: int
    typed: bool
    seconds: float


@dataclass
class Transcript:
    work: Path
    env: dict[str, str]
    lines: list[str] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)

    def say(self, text: str = "") -> None:
        self.lines.append(text)

    def cpr(self, *args: str, note: str = "", check: bool = True) -> Step:
        shown = "cpr " + shlex.join(args)
        began = time.perf_counter()
        r = subprocess.run(
            [sys.executable, "-m", "cpr_neo4j", *args],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
        )
        step = Step(
            shown=shown,
            rc=r.returncode,
            seconds=time.perf_counter() - began,
            output=(r.stdout + r.stderr).rstrip(),
        )
        self.steps.append(step)
        print(f"[{step.seconds:6.1f} s] rc={step.rc} {shown}", flush=True)
        if note:
            self.say(note)
            self.say()
        self.block(f"$ {shown}\n{trim(step.output)}", f"{step.seconds:.1f} s, exit {step.rc}")
        if check and step.rc != 0:
            raise SystemExit(f"{shown} failed (exit {step.rc}):\n{step.output[-3000:]}")
        return step

    def block(self, text: str, caption: str = "") -> None:
        self.say("```console")
        self.say(text)
        self.say("```")
        if caption:
            self.say(f"<sub>{caption}</sub>")
        self.say()


def trim(text: str) -> str:
    """`text` with each long table (rich's box lines) cut to its first and last rows, and
    any other long output to its first and last lines, marked "[... N lines ...]"."""
    out: list[str] = []
    run: list[str] = []

    def flush() -> None:
        if len(run) > TABLE_HEAD + TABLE_TAIL + 5:
            cut = len(run) - TABLE_HEAD - TABLE_TAIL
            out.extend([*run[:TABLE_HEAD], f"[... {cut} lines ...]", *run[-TABLE_TAIL:]])
        else:
            out.extend(run)
        run.clear()

    for line in text.splitlines():
        if line[:1] in BOX:
            run.append(line)
        else:
            flush()
            out.append(line)
    flush()
    if len(out) > HEAD + TAIL + 5:
        cut = len(out) - HEAD - TAIL
        out = [*out[:HEAD], f"[... {cut} lines ...]", *out[-TAIL:]]
    return "\n".join(out)


def strip_brackets(text: str) -> str:
    return re.sub(r"\[([^\]]*)\]", r"\1", text)


def sample_questions() -> list[tuple[str, int, list[str]]]:
    """(plain question, hops, gold answers): QUESTIONS // 2 each from MetaQA's 1-hop and
    2-hop test files, seeded, shuffled together."""
    rng = random.Random(SEED)
    out = []
    for hops in (1, 2):
        with gzip.open(DATA / f"{hops}-hop" / "test.txt.gz", "rt", encoding="utf-8") as fh:
            rows = [line.rstrip("\n").split("\t") for line in fh if "\t" in line]
        for q, answers in rng.sample(rows, QUESTIONS // 2):
            out.append((strip_brackets(q).strip(), hops, answers.split("|")))
    rng.shuffle(out)
    return out


def write_triples(path: Path) -> int:
    """MetaQA's KB as `head<TAB>relation<TAB>tail` (names as ids: no entities file)."""
    n = 0
    kb = DATA / "kb_partial_reconstructed.txt.gz"
    with gzip.open(kb, "rt", encoding="utf-8") as fh, path.open("w", encoding="utf-8") as out:
        for line in fh:
            parts = line.rstrip("\n").split("|")
            if len(parts) == 3:
                out.write("\t".join(parts) + "\n")
                n += 1
    return n


def kb_answers(topic: str, steps: list[tuple[str, bool]]) -> set[str]:
    """The entities at the end of `steps` from `topic` in MetaQA's KB (the topic excluded)."""
    edges: list[tuple[str, str, str]] = []
    with gzip.open(DATA / "kb_partial_reconstructed.txt.gz", "rt", encoding="utf-8") as fh:
        for line in fh:
            parts = line.rstrip("\n").split("|")
            if len(parts) == 3:
                edges.append((parts[0], parts[1], parts[2]))
    frontier = {topic}
    for rel, forward in steps:
        if forward:
            frontier = {t for h, r, t in edges if r == rel and h in frontier}
        else:
            frontier = {h for h, r, t in edges if r == rel and t in frontier}
    return frontier - {topic}


def set_check(t: Transcript, dataset: str, question: str) -> None:
    """How many of the question's right answers (from the KB) the set holds: the same ask
    again with --json, not shown as a command."""
    topic, steps = ASK_GOLD[question]
    gold = kb_answers(topic, steps)
    r = subprocess.run(
        [sys.executable, "-m", "cpr_neo4j", "ask", question, "--dataset", dataset,
         "--alpha", "0.1", "--json"],
        cwd=t.work, env=t.env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    names = [a["name"] for a in json.loads(r.stdout)["answers"]]
    hits = len(gold & set(names))
    ranks = [i for i, n in enumerate(names, 1) if n in gold]
    where = f"ranked {ranks[0]}-{ranks[-1]}" if ranks else "none of them in it"
    t.say(
        f"Checked against MetaQA's KB ({topic} {' then '.join(r for r, _ in steps)}: "
        f"{len(gold)} right answers): the set of {len(names)} holds {hits} of them ({where})."
    )
    t.say()


# ---- the person at the terminal (tmux, as tests/test_labelling_tmux.py drives it) ----


class Terminal:
    def __init__(self, work: Path, session: str):
        self.session = session
        conf = work / "tmux.conf"
        conf.write_text("set -g history-limit 200000\n")
        self.base = ["tmux", "-L", TMUX_SOCKET, "-f", str(conf)]
        self.tmux("kill-session", "-t", session, check=False)
        self.tmux("new-session", "-d", "-s", session, "-x", "200", "-y", "50", "-c", str(work))

    def tmux(self, *args: str, check: bool = True) -> str:
        r = subprocess.run([*self.base, *args], capture_output=True, text=True, check=check)
        return r.stdout

    def everything(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", self.session)

    def visible(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", self.session)

    def send(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.session, "-l", text)
        self.tmux("send-keys", "-t", self.session, "Enter")

    def wait(self, test, timeout: float = 300) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            screen = self.everything().rstrip()
            if test(screen):
                return screen
            time.sleep(0.3)
        raise SystemExit(f"the terminal never showed what was expected:\n{screen[-3000:]}")

    def close(self) -> None:
        self.tmux("kill-session", "-t", self.session, check=False)


def block_of(screen: str, header: str) -> str:
    return screen[screen.rindex("\n" + header) + 1 :]


def shown_numbers(block: str) -> dict[str, int]:
    numbers: dict[str, int] = {}
    for m in re.finditer(r"^\s+(\d+)\. (.+?)    ", block, re.M):
        numbers.setdefault(m.group(2), int(m.group(1)))
    return numbers


def label_in_tmux(t: Transcript, src: Source, asked) -> list[Labelled]:
    qfile = t.work / "questions.txt"
    qfile.write_text("".join(q + "\n" for q, _, _ in asked), encoding="utf-8")
    (t.work / "labelled.jsonl").unlink(missing_ok=True)
    (t.work / "labelled.jsonl.skipped").unlink(missing_ok=True)
    args = ["label", src.dataset, "questions.txt", "-o", "labelled.jsonl"]
    exports = " ".join(
        f"{k}={shlex.quote(v)}"
        for k, v in t.env.items()
        if k.startswith(("CPR_", "NEO4J_", "PYTHON")) or k == "PATH"
    )
    term = Terminal(t.work, f"label-{src.key}")
    n = len(asked)
    rows: list[Labelled] = []
    sample = ""
    began = replied = time.perf_counter()
    term.send(f"env {exports} {shlex.quote(sys.executable)} -m cpr_neo4j {shlex.join(args)}")
    # `cpr label` shows the questions in its own order (a hash of their text), so the
    # person reads each question off the screen and knows its gold answers by its text
    known = {q: (hops, gold) for q, hops, gold in asked}
    try:
        for k in range(1, n + 1):
            header = f"[{k}/{n}] "

            def at_prompt(screen: str, header=header) -> bool:
                return ("\n" + header) in screen and bool(re.search(r"\n> ?$", screen))

            screen = term.wait(at_prompt)
            t0 = time.perf_counter()
            waited = t0 - replied
            if k == 1:
                visible = term.visible().rstrip()
                sample = visible[visible.rindex(header) :] if header in visible else visible
            block = block_of(screen, header)
            question = block[len(header) :].splitlines()[0].strip()
            hops, gold = known[question]
            total = int(re.search(r"(\d+) candidate answer", block).group(1))
            numbers = shown_numbers(block)
            pages = 1
            want = set(gold)
            while not want <= set(numbers) and max(numbers.values(), default=0) < total:
                before = len(numbers)
                term.send("m")
                screen = term.wait(
                    lambda s, header=header, before=before: (
                        at_prompt(s) and len(shown_numbers(block_of(s, header))) > before
                    )
                )
                numbers = shown_numbers(block_of(screen, header))
                pages += 1
            folded = {name.casefold(): i for name, i in reversed(list(numbers.items()))}
            marks = sorted({folded[g.casefold()] for g in gold if g.casefold() in folded})
            if marks:
                term.send(" ".join(map(str, marks)))
            else:  # the graph's candidates lack every gold answer: type one
                term.send(f"a {gold[0]}")
            replied = time.perf_counter()
            rows.append(
                Labelled(
                    question=question,
                    hops=hops,
                    gold=len(gold),
                    wait=waited,
                    candidates=total,
                    pages=pages,
                    marked=len(marks),
                    typed=not marks,
                    seconds=replied - t0,
                )
            )
            print(f"  [{k}/{n}] {rows[-1]}", flush=True)
        screen = term.wait(lambda s: bool(re.search(r"next: cpr ingest .*\n.*[$#] ?$", s)))
    finally:
        term.close()
    took = time.perf_counter() - began
    t.steps.append(Step(shown="cpr " + shlex.join(args), rc=0, seconds=took, output=""))
    end = screen[screen.rindex("\n" + f"[{n}/{n}] ") + 1 :]
    summary = end[end.index("saved ") :] if "saved " in end else end
    summary = "\n".join(x for x in summary.splitlines() if not re.search(r"[$#] ?$", x))

    t.say(
        f"`cpr label` in a terminal (tmux, 200x50), driven as a person: {n} plain questions "
        f"(MetaQA test, {n // 2} 1-hop and {n // 2} 2-hop, seed {SEED}, brackets and answers "
        "stripped). The person knows MetaQA's gold answers: per question they read the "
        "candidates off the screen, ask for more pages (`m`) until every gold answer is shown "
        "or none is left, mark the candidates named as gold answers, and type `a NAME` when "
        "no candidate is one. Nothing skipped."
    )
    t.say()
    t.say("What the person sees for the first question (the screen, captured):")
    t.say()
    t.block(f"$ cpr {shlex.join(args)}\n...\n{trim(sample)}")
    t.say("Its last lines, after the 60th question:")
    t.say()
    t.block(trim(summary), f"the labelling took {took:.0f} s in all ({took / n:.1f} s a question)")
    t.say("Per question, what the person did:")
    t.say()
    t.say(
        "Columns: gold = MetaQA's gold answers; candidates = what `cpr label` listed; pages "
        "= pages of 15 looked at (1 + the `m`s); marked = candidates marked (those named as "
        "gold answers); typed = `a NAME` sent; search s = from the previous reply to this "
        "question's prompt (the tool linking and searching); paging s = from the prompt to "
        "the reply (each page asked for, drawn and read off the screen by the driver)."
    )
    t.say()
    t.say(
        "| # | question | hops | gold | candidates | pages | marked | typed | search s | paging s |"
    )
    t.say("|---:|---|---:|---:|---:|---:|---:|---|---:|---:|")
    for i, r in enumerate(rows, 1):
        t.say(
            f"| {i} | {r.question} | {r.hops} | {r.gold} | {r.candidates} | {r.pages} | "
            f"{r.marked} | {'yes' if r.typed else ''} | {r.wait:.1f} | {r.seconds:.1f} |"
        )
    t.say()
    typed = sum(r.typed for r in rows)
    all_gold = sum(r.marked == r.gold for r in rows)
    pages = sorted(r.pages for r in rows)
    t.say(
        f"In all: {n - typed} questions marked ({sum(r.marked for r in rows)} answers; all "
        f"their gold answers found among the candidates for {all_gold}), {typed} typed "
        f"(the graph's candidates held no gold answer), 0 skipped; "
        f"{sum(pages)} pages looked at (median {pages[n // 2]}, most {pages[-1]}; "
        f"{sum(p > 1 for p in pages)} questions needed more than one, "
        f"{sum(p > 10 for p in pages)} more than ten); {took:.0f} s for the labelling: "
        f"{sum(r.wait for r in rows):.0f} s of the tool's search, "
        f"{sum(r.seconds for r in rows):.0f} s of paging (a person reading the screen "
        "takes longer: the time here is the tool's, not a person's)."
    )
    t.say()
    return rows


# ---- the user's property graph ----


def user_graph_write():
    from cpr_neo4j.graph.store import GraphStore
    from tests import user_graphs as ug

    with GraphStore() as store:
        ug.drop(store, GRAPH)
        began = time.perf_counter()
        sent = ug.write_metaqa(store, GRAPH)
        return sent, time.perf_counter() - began


def user_graph_snapshot() -> dict:
    from cpr_neo4j.graph.store import GraphStore
    from tests import user_graphs as ug

    with GraphStore() as store:
        return ug.snapshot(store, GRAPH)


def counts(snap: dict) -> dict[str, int]:
    out: dict[str, int] = {"nodes": len(snap["nodes"]), "relationships": len(snap["rels"])}
    for _, labels, _ in snap["nodes"]:
        for label in labels:
            if label != GRAPH:
                out[f":{label}"] = out.get(f":{label}", 0) + 1
    for _, _, rtype, _, _ in snap["rels"]:
        out[f"[:{rtype}]"] = out.get(f"[:{rtype}]", 0) + 1
    return out


# ---- one source, start to end ----


def walk(src: Source, env: dict[str, str]) -> list[str]:
    work = Path(tempfile.mkdtemp(prefix=f"own-graph-{src.key}-"))
    t = Transcript(work=work, env=env)
    asked = sample_questions()
    began = time.perf_counter()
    t.say(f"## {src.title}")
    t.say()
    # a clean start: the dataset, its models and asks from an earlier run removed
    t.cpr("drop", src.dataset, "--asks", "delete", "--models", "delete", "--yes", check=False)
    t.lines.clear()
    t.steps.clear()
    t.say(f"## {src.title}")
    t.say()
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    t.say(f"<sub>Run {now}, load average {load} at its start.</sub>")
    t.say()
    before = None
    if src.key == "triples":
        n = write_triples(work / "triples.tsv")
        t.say(
            f"The user's graph: `triples.tsv`, {n:,} lines `head<TAB>relation<TAB>tail` written "
            "from MetaQA's KB (`data/metaqa/kb_partial_reconstructed.txt.gz`), names as ids, "
            "no entities file and no questions:"
        )
        t.say()
        head = (work / "triples.tsv").read_text(encoding="utf-8").splitlines()[:3]
        t.block("$ head -3 triples.tsv\n" + "\n".join(head))
        t.cpr("ingest", src.dataset, "--triples", "triples.tsv")
    else:
        sent, took = user_graph_write()
        before = user_graph_snapshot()
        t.say(
            f"The user's graph: MetaQA's KB written into Neo4j as a user would have it "
            f"(`tests/user_graphs.py`: `(:Movie {{title}})-[:DIRECTED_BY]->(:Person {{name}})`, "
            f"genres, tags and languages by `name`, years, ratings and votes by `value`; "
            f"{sent:,} relationships sent in {took:.0f} s), every node also under a marker "
            f"label `:{GRAPH}` so it can be counted apart from cpr's own nodes. No questions."
        )
        t.say()
        names = [x for p in PG_NAMES for x in ("--name-property", p)]
        t.cpr("ingest", src.dataset, "--from-neo4j", "--labels", PG_LABELS, *names)
    t.say("### Answers before any label")
    t.say()
    for q in ASKS:
        t.cpr("ask", q, "--dataset", src.dataset)
    if src.key == "triples":
        t.say("### Training on questions generated from the graph (optional)")
        t.say()
        t.cpr(
            "train",
            src.dataset,
            *PRE_TRAIN,
            note="Small settings (100 generated questions, 4 rollouts, 1 epoch): it changes the "
            "ranking, not the promise: still no guarantee.",
        )
        t.cpr("ask", ASKS[1], "--dataset", src.dataset)
    else:
        t.say(
            "(No training before the labels here: `cpr label` lists the candidates as ranked "
            "by the semantic scorer V_sem, where the triples file's labelling used a model "
            "trained on 100 generated questions; compare the pages looked at.)"
        )
        t.say()
    t.say("### Labelling 60 plain questions in the terminal")
    t.say()
    rows = label_in_tmux(t, src, asked)
    t.say("### The labels join the dataset; train, calibrate")
    t.say()
    t.cpr("ingest", src.dataset, "--questions", "labelled.jsonl")
    t.cpr(
        "train",
        src.dataset,
        *TRAIN,
        note="Small settings again. With 60 labels the tool keeps 59 for calibration and "
        "trains on the one left plus generated questions.",
    )
    t.cpr("calibrate", src.dataset)
    t.say("### Answers with their guarantee")
    t.say()
    for q in ASKS:
        t.cpr("ask", q, "--dataset", src.dataset, "--alpha", "0.1")
        set_check(t, src.dataset, q)
    if before is not None:
        after = user_graph_snapshot()
        b, a = counts(before), counts(after)
        t.say("### The user's graph, before and after")
        t.say()
        t.say(
            f"Every node and relationship under `:{GRAPH}` read before `cpr ingest` and after "
            "the last command (`tests/user_graphs.py` snapshot: each node's labels and "
            "properties, each relationship's ends, type and properties):"
        )
        t.say()
        t.say("| | before | after |")
        t.say("|---|---:|---:|")
        for key in sorted(b.keys() | a.keys(), key=lambda k: (k[0] in ":[", k)):
            t.say(f"| {key} | {b.get(key, 0):,} | {a.get(key, 0):,} |")
        t.say()
        same = "identical" if before == after else "DIFFERENT"
        t.say(f"Every node's labels and properties and every relationship: **{same}**.")
        t.say()
    took = time.perf_counter() - began
    t.say("### Timings")
    t.say()
    t.say("| command | s |")
    t.say("|---|---:|")
    for s in t.steps:
        t.say(f"| `{s.shown}` | {s.seconds:.1f} |")
    t.say(f"| the whole path (with writing the user's graph) | {took:.0f} |")
    t.say()
    typed = sum(r.typed for r in rows)
    print(f"{src.key}: {took:.0f} s, {typed} typed", flush=True)
    shutil.rmtree(work, ignore_errors=True)
    return t.lines


def header(argv: list[str]) -> list[str]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    if dirty:
        commit += " with uncommitted changes"
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return [
        "# Your own graph, from zero: transcripts",
        "",
        f"Made by `python experiments/own_graph.py {shlex.join(argv)}` on {now}, commit "
        f"`{commit}`, on a machine with {os.cpu_count()} cores and load average {load} "
        "(1/5/15 min) at the start (shared with other work: times are noisy). The path of a "
        "new user with a graph and no labelled questions (issue 57), every command run as a "
        "user runs it, its stdout and stderr verbatim (long ones trimmed where marked).",
        "",
    ]


def merge(out: Path, head: list[str], sections: dict[str, list[str]]) -> str:
    old = out.read_text(encoding="utf-8") if out.exists() else ""
    parts = ["\n".join(head)]
    for key in SOURCES:
        if key in sections:
            body = "\n".join(sections[key])
        else:
            m = re.search(rf"<!-- {key}:start -->\n(.*?)<!-- {key}:end -->", old, re.S)
            if not m:
                continue
            body = m.group(1).rstrip("\n")
        parts.append(f"<!-- {key}:start -->\n{body}\n<!-- {key}:end -->")
    return "\n".join(parts) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "own-graph.md")
    ap.add_argument("--source", choices=[*SOURCES], help="one source (default: both)")
    a = ap.parse_args()
    if not shutil.which("tmux"):
        raise SystemExit("tmux is needed to drive `cpr label` (`make tmux-prereqs`)")
    env = dict(os.environ, COLUMNS=COLUMNS)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    head = header(sys.argv[1:])
    sections = {}
    for key in [a.source] if a.source else list(SOURCES):
        sections[key] = walk(SOURCES[key], env)
        a.out.write_text(merge(a.out, head, sections), encoding="utf-8")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
