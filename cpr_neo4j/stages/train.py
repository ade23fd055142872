"""`cpr train`: PUCT rollouts over Neo4j -> path pairs -> RCVNet -> saved model + :ScoringModel.

Choices (recorded in the model's config):
- training questions = the training split ('train', else 'dev') of the requested hop count,
  minus a seeded calibration reserve that `cpr calibrate` uses and training never sees
  (training/labels.py: 10%, but at least 59 or every label when there are fewer; or exactly
  `cal_share`), minus a seeded inner dev share (10% of the rest) that training and
  calibration never see:
  `cpr eval --split inner-dev` answers it, and every default is chosen there, never on test;
- a further 10% of the training questions is held out to report pairwise accuracy;
- at most `max_questions` training questions are rolled out: MetaQA's questions collapse to
  a few hundred templates, so more mostly repeats the same pairs;
- generated questions (training/generate.py; by default as many as bring the labelled
  training questions up to 300, so 300 with none and none past 300) are added to the
  training questions only: never to the calibration reserve, the inner dev share or the
  held-out questions when real ones exist; with no labelled question at all a model trains
  on them alone, and its score temperature is a fixed 10 (fitted on held-out labelled
  questions otherwise);
- scope: with per-question subgraphs (graph/subgraphs.py) each question's rollouts, gold
  paths and TreeG negatives see only its own subgraph (`--scope subgraph`, the default
  there), else the whole graph.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timezone

from cpr_neo4j.errors import CprError
from cpr_neo4j.graph import fingerprint, records
from cpr_neo4j.graph.neighbours import DEFAULT_FANOUT_CAP, Neo4jNeighbours, gold_paths
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.graph.subgraphs import GRAPH, resolve_scope
from cpr_neo4j.model.encoder import TextEncoder, step_text
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.model.store import save_scorer
from cpr_neo4j.model.train import pairwise_accuracy, train_rcvnet
from cpr_neo4j.search.adjacency_cache import CachedAdjacency
from cpr_neo4j.search.base import Step
from cpr_neo4j.search.treeg import Retrieval, retrieve
from cpr_neo4j.stages.scoring import fit_temperature
from cpr_neo4j.training import labels
from cpr_neo4j.training import questions as qsel
from cpr_neo4j.training.generate import MAX_ANSWERS, generate, is_generated, labelled_splits
from cpr_neo4j.training.puct import EntityPath, PathPair, PuctCollector, RelationPriors

# Generated questions by default: enough to bring the labelled training questions up to
# GENERATED_FILL (all 300 with none), so a dataset with hundreds of labels trains as
# before. 300, not 1,000, chosen on inner dev splits of metaqa-plain and webqsp-names
# (docs/method.md, "Mixing generated with real questions" and "Generated questions
# alone"): 900 generated to 100 real doubled webqsp's sets, and 1,000 alone gave it larger
# sets than the untrained scorer where 300 gave smaller ones
GENERATED_FILL = 300
# The score temperature when no labelled training question is held out to fit it on: a fit
# on held-out generated questions comes out sharp (0.8-3.0), since the model finds them
# easier than real ones, and a flat T = 10 beat it for real calibration and test questions
# on inner dev splits of metaqa-plain and webqsp-names (docs/method.md, "Generated
# questions alone, and the score temperature"); a fit on even 3 held-out labelled questions
# beat T = 10 on metaqa-plain and tied on webqsp-names, so those keep their fit.
UNLABELLED_TEMPERATURE = 10.0
NO_QUESTIONS_HOPS = 2  # depth for a graph without labelled questions (unless --hops)


@dataclass
class TrainSettings:
    dataset: str
    hops: int | None = None  # None: every question, depth = the split's largest hop count
    negatives: str = "puct"  # or "random" (Abl.2)
    cal_share: float | None = None  # None: training/labels.py's reserve rule
    heldout_share: float = 0.1
    dev_share: float = 0.1  # inner dev split for choosing defaults (never trained on)
    max_questions: int = 2000
    rollouts: int = 32
    c_puct: float = 2.0
    max_pairs: int = 16
    epochs: int = 6
    lr: float = 5e-3
    batch_size: int = 256
    anchor: float = 1.0  # shared-scale loss term (model.train); 0 = the paper's loss alone
    # CPR's pairs also take TreeG's own wrong candidates and Abl.2's random walks (README,
    # "Method": chosen on the mixed inner dev split)
    retrieval_negatives: bool = True
    random_negatives: bool = True
    seed: int = 0
    device: str | None = None
    fanout_cap: int = DEFAULT_FANOUT_CAP
    scope: str | None = None  # "subgraph" | "graph"; None: subgraph when the dataset has them
    # questions generated from the graph added to training (None: generated_count, what
    # `cpr train` asks for; the API's default stays none, as before they existed)
    generated: int | None = 0
    generated_answers: int = MAX_ANSWERS  # a generated question with more answers is dropped
    llm_url: str | None = None  # paraphrase generated questions through this server
    llm_model: str | None = None
    # with generated questions: the real questions' pairs repeated so that they make at
    # least this share of the training pairs (None: as collected, generated ones outnumber)
    real_share: float | None = None
    # the anchor term (shared cost scale) on generated questions' pairs too; False: only on
    # real ones, the questions calibration sees
    anchor_generated: bool = True
    # explicit shares (experiments/few_labels.py): labelled question ids to calibrate on
    # and to train on; the rest of the split is then unused
    calibration_ids: tuple[str, ...] | None = None
    # with explicit ids: questions recorded as the inner dev split (never trained on), which
    # `cpr eval --split inner-dev` halves into calibration and measured questions
    inner_dev_ids: tuple[str, ...] | None = None
    training_ids: tuple[str, ...] | None = None


def weigh_real(pairs: list[PathPair], share: float | None) -> list[PathPair]:
    """Repeat the real questions' pairs so that they make at least `share` of the list:
    a few hundred labels among a thousand generated questions otherwise weigh a tenth."""
    if share is None:
        return pairs
    if not 0 < share < 1:
        raise CprError(f"the real questions' share must lie strictly between 0 and 1, got {share}")
    real = [p for p in pairs if not is_generated(str(p.question_id))]
    made = len(pairs) - len(real)
    if not real or not made or len(real) >= share * len(pairs):
        return pairs
    times = round(share * made / ((1 - share) * len(real)))
    return pairs + real * max(times - 1, 0)


def generated_count(labelled_training: int) -> int:
    """Generated questions `cpr train` adds by default (module docstring)."""
    return max(0, GENERATED_FILL - labelled_training)


@dataclass
class TrainResult:
    model_id: str
    folder: str
    figures: dict


def _gold(
    store: GraphStore, dataset: str, q: qsel.Question, depth: int, scoped: bool
) -> list[EntityPath]:
    scope = q.id if scoped else None
    paths = gold_paths(store, dataset, q.topics, q.answers, depth, question=scope)
    return [
        EntityPath(start, tuple(s for s, _ in edges), tuple(e for _, e in edges))
        for start, edges in paths
    ]


def wrong_candidates(r: Retrieval, answers: set[str], min_precision: float) -> list[EntityPath]:
    """TreeG's candidates that answer badly, best-ranked first, each as one entity path
    to a wrong end: no gold answer among its ends, or a gold share below `min_precision`
    times the best candidate's (the collector's precision rule for positives)."""
    share = {c.path: len(answers & c.ends.keys()) / max(len(c.ends), 1) for c in r.candidates()}
    best = max(share.values(), default=0.0)
    out = []
    for c in sorted(r.candidates(), key=lambda c: (c.cost, c.path)):
        wrong_ends = sorted(
            e for e in c.ends if e not in answers and (r.topic_answers or e not in r.topics)
        )
        if wrong_ends and (share[c.path] == 0 or share[c.path] < min_precision * best):
            chain = r.chain(c, wrong_ends[0])
            out.append(EntityPath(chain[0], c.path, tuple(chain[1:])))
    return out


def collect(
    store: GraphStore,
    s: TrainSettings,
    scorer: PathScorer,
    priors: RelationPriors,
    qs: list[qsel.Question],
    depth: int,
    tick: Callable[[], None],
    scope: str = GRAPH,
    topic_answers: bool = False,
) -> tuple[list, dict]:
    # one neighbour cache across the training questions: they share hubs and topics, so
    # most rollouts read rows fetched for an earlier question (same rows, same pairs)
    whole = CachedAdjacency(Neo4jNeighbours(store, s.dataset, s.fanout_cap))
    scoped = scope != GRAPH
    collector = PuctCollector(
        whole,
        scorer,
        priors,
        c_puct=s.c_puct,
        rollouts=s.rollouts,
        seed=s.seed,
        max_pairs=s.max_pairs,
        negatives=s.negatives,
        random_walks=s.random_negatives,
        topic_answers=topic_answers,
    )
    pairs: list[PathPair] = []
    stats = {"rollouts": 0, "round_trips": 0, "gold_queries": 0, "rollout_successes": 0}
    for q in qs:
        # the question's own subgraph, when scoped: the collector reads `source` per question
        # (a generated question has none: it was walked on the whole graph)
        own = scoped and not is_generated(q.id)
        source = Neo4jNeighbours(store, s.dataset, s.fanout_cap, question=q.id) if own else whole
        collector.source = source
        gold = _gold(store, s.dataset, q, depth, own)
        stats["gold_queries"] += 1
        pairs += collector.collect(q.topics, q.answers, q.masked, depth, gold, q.id)
        if s.retrieval_negatives and s.negatives == "puct":
            found = retrieve(
                source, scorer, scorer.question(q.masked), q.topics, depth,
                topic_answers=topic_answers,
            )  # fmt: skip
            wrong = wrong_candidates(found, set(q.answers), collector.min_precision)
            pairs += collector.candidate_pairs(wrong, q.answers, q.id, q.masked)
        stats["rollouts"] += s.rollouts
        stats["round_trips"] += collector.last_stats["round_trips"]
        stats["rollout_successes"] += collector.last_stats["rollout_successes"]
        tick()
    return pairs, stats


def whole_source(store: GraphStore, s: TrainSettings) -> CachedAdjacency:
    return CachedAdjacency(Neo4jNeighbours(store, s.dataset, s.fanout_cap))


def train(
    store: GraphStore,
    s: TrainSettings,
    tick: Callable[[], None] = lambda: None,
    on_questions: Callable[[int], None] = lambda n: None,
) -> TrainResult:
    began = time.perf_counter()
    records.require_dataset(store, s.dataset)
    have = labelled_splits(store, s.dataset)
    split = qsel.training_split(store, s.dataset) if have else "train"
    depth = s.hops or (qsel.default_hops(store, s.dataset, split) if have else NO_QUESTIONS_HOPS)
    pool = qsel.load(store, s.dataset, split, s.hops) if have else []
    if not pool and s.generated == 0:  # the API's default; `cpr train` asks for None
        raise CprError(
            f"no {split} questions with topic and answer in {s.dataset!r}"
            + (f" with {s.hops} hops" if s.hops else "")
            + f": train on questions generated from the graph (`cpr train {s.dataset}`), or "
            f"label some (`cpr label {s.dataset} questions.txt -o labelled.jsonl`)"
        )
    if s.calibration_ids is not None or s.training_ids is not None:
        chosen, dev = set(s.calibration_ids or ()), set(s.inner_dev_ids or ())
        cal = [q for q in pool if q.id in chosen]
        rest = [q for q in pool if q.id in set(s.training_ids or ()) - chosen - dev]
        if len(rest) > s.max_questions:  # a sample: the pool's order sorts MetaQA by hops
            rest = random.Random(s.seed).sample(rest, s.max_questions)
        inner_dev = [q for q in pool if q.id in dev - chosen]
    else:
        rest, cal = labels.reserve(pool, s.cal_share, s.seed)
        rest, inner_dev = qsel.split_off(rest, s.dev_share, s.seed + 2)
    labelled_training = len(rest)
    rest = rest[: s.max_questions]
    fit, held = qsel.split_off(rest, s.heldout_share, s.seed + 1)

    scope_early = resolve_scope(store, s.dataset, s.scope)
    topic_answers = records.topic_answers(store, s.dataset)
    relation_text = records.relation_text(store, s.dataset)
    made = []
    paraphrased = None
    n_generated = s.generated
    if n_generated is None:  # generated questions are graph-wide: none for subgraph datasets
        n_generated = 0 if scope_early != GRAPH else generated_count(labelled_training)
    if n_generated:
        rewrite = None
        if s.llm_url:
            from cpr_neo4j.training.paraphrase import Paraphraser

            rewrite = Paraphraser(s.llm_url, s.llm_model)
        made = generate(
            store, s.dataset, n_generated, depth, relation_text, seed=s.seed + 7,
            topic_answers=topic_answers, max_answers=s.generated_answers,
            fanout_cap=s.fanout_cap, paraphrase=rewrite,
        )  # fmt: skip
        paraphrased = rewrite.stats.rewritten if rewrite else None
    gen = [g.question() for g in made]
    if held:  # real held-out questions measure accuracy and fit the temperature
        fit = fit + gen
    else:
        gen_fit, gen_held = qsel.split_off(gen, s.heldout_share, s.seed + 3)
        fit, held = fit + gen_fit, gen_held
    if not fit:
        raise CprError(
            f"nothing to train {s.dataset!r} on: every labelled question went to calibration "
            "and no question could be generated from the graph"
        )
    on_questions(len(fit) + len(held))

    scope = scope_early
    encoder = TextEncoder(device=s.device)
    vsem = PathScorer(encoder, relation_text, device=s.device)
    priors = RelationPriors()
    t0 = time.perf_counter()
    fit_pairs, fit_stats = collect(store, s, vsem, priors, fit, depth, tick, scope, topic_answers)
    held_pairs, _ = collect(store, s, vsem, priors, held, depth, tick, scope, topic_answers)
    collect_seconds = time.perf_counter() - t0
    if s.negatives == "puct":  # Abl.2 has no rollouts: its priors stay uniform, unsaved
        records.save_priors(store, s.dataset, priors.to_dict())

    scorer = PathScorer(encoder, relation_text, priors.rho_map(), device=s.device)
    train_pairs = weigh_real(fit_pairs, s.real_share)
    report = train_rcvnet(
        scorer,
        train_pairs,
        epochs=s.epochs,
        lr=s.lr,
        batch_size=s.batch_size,
        seed=s.seed,
        anchor=s.anchor,
        progress=False,
        anchored=None
        if s.anchor_generated
        else [not is_generated(str(p.question_id)) for p in train_pairs],
    )
    # the score family's temperature, fitted on the held-out labelled training questions
    # (never on calibration or inner dev questions; stages/scoring.py), fixed without them
    t1 = time.perf_counter()
    labelled_held = [q for q in held if not is_generated(q.id)]
    temperature = UNLABELLED_TEMPERATURE
    if labelled_held:
        temperature = fit_temperature(
            [retrieve(whole_source(store, s), scorer, scorer.question(q.masked), q.topics,
                      depth, topic_answers=topic_answers) for q in labelled_held],
            [set(q.answers) for q in labelled_held],
        )  # fmt: skip
    figures = {
        "questions_train": len(fit),
        "questions_heldout": len(held),
        "questions_cal": len(cal),
        "questions_inner_dev": len(inner_dev),
        "questions_generated": len(made),
        "questions_paraphrased": paraphrased,
        "labels": len(pool),
        "pairs_train": len(fit_pairs),
        "pairs_heldout": len(held_pairs),
        "rollouts": fit_stats["rollouts"],
        "rollout_successes": fit_stats["rollout_successes"],
        "collect_seconds": round(collect_seconds, 1),
        "questions_per_second": round((len(fit) + len(held)) / max(collect_seconds, 1e-9), 2),
        "round_trips_per_question": round(fit_stats["round_trips"] / max(len(fit), 1), 2),
        "train_seconds": report.seconds,
        "temperature": temperature,
        "temperature_fitted_on": len(labelled_held),  # 0: UNLABELLED_TEMPERATURE
        "temperature_seconds": round(time.perf_counter() - t1, 1),
        "epoch_losses": report.epoch_losses,
        "heldout_accuracy_vsem": pairwise_accuracy(scorer, held_pairs, use_net=False),
        "heldout_accuracy_rcvnet": pairwise_accuracy(scorer, held_pairs, use_net=True),
        "device": report.device,
        "seconds": round(time.perf_counter() - began, 1),
    }
    meta = {
        "dataset": s.dataset,
        "split": split,
        "hops": depth,
        "hops_filter": s.hops,
        "scope": scope,
        "settings": asdict(s),
        "figures": figures,
        "temperature": temperature,
        "topic_answers": topic_answers,
        "priors": priors.to_dict(),
        "calibration_ids": sorted(q.id for q in cal),
        "inner_dev_ids": sorted(q.id for q in inner_dev),
        "training_ids": sorted(q.id for q in rest),  # rolled out (fit + held-out pairs)
        # generated questions trained on (ids start with gen:, never in Neo4j): count only
        "generated": len(made),
        # no labelled question was trained on: every labelled question of the split added
        # later may calibrate this model (stages/calibrate.py)
        "labels_trained": len(rest),
    }
    folder = save_scorer(scorer, meta)
    model_id = scorer.model_id
    records.save_model(
        store,
        model_id,
        {
            "dataset": s.dataset,
            "split": split,
            "hops": depth,
            "hops_filter": s.hops or records.ALL_HOPS,
            "negatives": s.negatives,
            "scope": scope,
            "created": datetime.now(timezone.utc).isoformat(),
            "path": str(folder),
            "encoder": encoder.model_name,
            "graph_fingerprint": fingerprint.current(store, s.dataset),
            "settings": asdict(s),
            **{k: v for k, v in figures.items() if not isinstance(v, list)},
        },
    )
    steps = [Step(r, fwd) for r in sorted(relation_text) for fwd in (True, False)]
    vectors = encoder.encode([step_text(st, relation_text) for st in steps])
    records.save_relation_embeddings(
        store,
        s.dataset,
        encoder.model_name,
        [
            {
                "name": st.relation,
                "direction": "forward" if st.forward else "reverse",
                "embedding": v.tolist(),
            }
            for st, v in zip(steps, vectors, strict=True)
        ],
    )
    return TrainResult(model_id, str(folder), figures)
