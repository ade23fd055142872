"""Path costs V(p) = V_sem(p) + Delta_theta(x(p), c(p)) (lower = more plausible).

A path's cost depends only on (masked question, relation sequence), so everything is
keyed by RelPath: embeddings of questions, steps and path texts live in growing numpy
tables, and a batch of paths costs one dict lookup per path plus a few array ops.

Backends: "numpy" (the default, CPU, no torch) or "torch" (`device="cuda"`: the tables are
mirrored to the GPU and the net runs as a torch module, model.rcvnet_torch). The numpy
path caches the conditioner's first layer per row: it is linear in c = [q, r, p], so
c W^T + b = A[question] + B[last step] + C[path] (C holding b), each computed once per row;
equal to the product on c up to the rounding of those two float32 additions. Every product
and dot product is exact up to one rounding (model.exact): a path's cost is the same bits
in any batch, in any order, with any thread count, BLAS kernel or CPU, given the same
embeddings (docs/method.md, "The same score in every batch"), so it is computed once
per (question, path) and kept (model.costs).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from cpr_neo4j.model.costs import CostCache
from cpr_neo4j.model.encoder import DIM, TEXT_FORMAT, path_text, step_text
from cpr_neo4j.model.exact import product, row_dots
from cpr_neo4j.model.rcvnet import RCVWeights
from cpr_neo4j.search.base import RelPath, Step

if TYPE_CHECKING:
    from cpr_neo4j.model.encoder import TextEncoder

DEFAULT_RHO = 0.5  # mean of the Beta(1, 1) prior: a step never seen in rollouts
BACKENDS = ("numpy", "torch")


@dataclass(frozen=True)
class QueryContext:
    """A masked question, embedded once; `row` indexes the scorer's question table."""

    text: str
    row: int


class _Rows:
    """A growing (capacity-doubling) numpy array; rows are only ever appended."""

    def __init__(self, tail: tuple[int, ...], dtype: Any):
        self.data = np.zeros((64, *tail), dtype=dtype)
        self.size = 0

    def append(self, values: np.ndarray) -> None:
        need = self.size + len(values)
        if need > len(self.data):
            grown = np.zeros((max(need, 2 * len(self.data)), *self.data.shape[1:]), self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size : need] = values
        self.size = need

    @property
    def view(self) -> np.ndarray:
        return self.data[: self.size]


class PathScorer:
    """Scores relation paths for a masked question; `net=None` gives the V_sem-only scorer.

    net: RCVWeights, or a torch RCVNet (its weights are copied now). backend/device: see the
    module docstring; `device="cuda"` implies the torch backend."""

    def __init__(
        self,
        encoder: TextEncoder,
        relation_text: Mapping[str, str],
        priors_rho: Mapping[str, float] | None = None,
        net: Any = None,
        device: str | None = None,
        backend: str | None = None,
    ):
        self.encoder = encoder
        self.relation_text = dict(relation_text)
        self.rho = {k: float(v) for k, v in (priors_rho or {}).items()}
        self.requested_device = device  # None: the default (training then takes CUDA if any)
        self.device = str(device or "cpu")
        self.backend = backend or ("numpy" if self.device == "cpu" else "torch")
        if self.backend not in BACKENDS or (self.backend == "numpy" and self.device != "cpu"):
            raise ValueError(f"no scorer backend {self.backend!r} on device {self.device!r}")
        self._questions: dict[str, QueryContext] = {}
        self._q = _Rows((DIM,), np.float32)
        self._step_row: dict[Step, int] = {}
        self._steps = _Rows((DIM,), np.float32)
        self._step_rho = _Rows((), np.float32)
        self._path_row: dict[RelPath, int] = {}
        self._row_text: list[str] = []  # question row -> masked text
        self._row_path: list[RelPath] = []  # path row -> relation path
        self._paths = _Rows((DIM,), np.float32)
        self._path_last = _Rows((), np.int64)  # path row -> its last step's row
        self.net = net

    # ---- the net and its per-row caches ------------------------------------------------

    @property
    def net(self) -> RCVWeights | None:
        return self._net

    @net.setter
    def net(self, net: Any) -> None:
        if net is not None and not isinstance(net, RCVWeights):
            net = RCVWeights.from_module(net)  # a torch RCVNet
        self._net = net
        self._torch: Any = None  # the torch backend, rebuilt for these weights when used
        self._proj: dict[str, _Rows] | None = None
        self.costs = CostCache()  # this net's; `cpr serve` shares one among a model's scorers
        if net is not None and self.backend == "numpy":
            self._proj = {}
            for name, table in (("q", self._q), ("steps", self._steps), ("paths", self._paths)):
                self._proj[name] = _Rows((net.config.cond_hidden,), np.float32)
                self._project(name, table.view)

    def _project(self, name: str, rows: np.ndarray) -> None:
        """Append the first-layer projections of new table rows (numpy backend with a net)."""
        if self._proj is None or not len(rows):
            return
        w_q, w_r, w_p, bias = self._net.first_layer_parts()
        w = {"q": w_q, "steps": w_r, "paths": w_p}[name]
        out = w.times(rows)
        self._proj[name].append(out + bias if name == "paths" else out)

    def embedded(self) -> tuple[list[str], np.ndarray]:
        """Every text this scorer embedded (questions, step and path texts) and its vector:
        what `cpr calibrate` keeps in the encoder's disk cache for later processes."""
        texts = list(self._questions)
        texts += [step_text(s, self.relation_text) for s in self._step_row]
        texts += [path_text(p, self.relation_text) for p in self._path_row]
        vectors = np.concatenate([self._q.view, self._steps.view, self._paths.view])
        return texts, vectors

    def tables(self) -> dict[str, np.ndarray]:
        """The embedding tables (read them, never write): for the torch mirror and training."""
        return {
            "q": self._q.view,
            "steps": self._steps.view,
            "step_rho": self._step_rho.view,
            "paths": self._paths.view,
            "path_last": self._path_last.view,
        }

    # ---- embeddings -------------------------------------------------------------------

    def question(self, masked_text: str) -> QueryContext:
        ctx = self._questions.get(masked_text)
        return ctx if ctx is not None else self.questions([masked_text])[0]

    def questions(self, masked_texts: Sequence[str]) -> list[QueryContext]:
        """Many questions at once: unseen texts are embedded in one batch."""
        new = [t for t in dict.fromkeys(masked_texts) if t not in self._questions]
        if new:
            vectors = self.encoder.encode(new)
            self._q.append(vectors)
            self._project("q", vectors)
            for i, text in enumerate(new):
                self._questions[text] = QueryContext(text, self._q.size - len(new) + i)
            self._row_text += new
        return [self._questions[t] for t in masked_texts]

    def _add_steps(self, steps: Sequence[Step]) -> None:
        new = [s for s in dict.fromkeys(steps) if s not in self._step_row]
        if not new:
            return
        vectors = self.encoder.encode([step_text(s, self.relation_text) for s in new])
        for s in new:
            self._step_row[s] = len(self._step_row)
        self._steps.append(vectors)
        self._project("steps", vectors)
        self._step_rho.append(np.array([self.rho.get(s.key(), DEFAULT_RHO) for s in new]))

    def path_rows(self, paths: Sequence[RelPath]) -> np.ndarray:
        """Row of every path in the path table (unseen paths embedded in one batch)."""
        rows = self._path_row
        try:
            return np.array([rows[p] for p in paths], dtype=np.int64)
        except KeyError:
            pass
        new = [p for p in dict.fromkeys(paths) if p not in rows]
        if any(len(p) == 0 for p in new):
            raise ValueError("cannot score an empty path")
        self._add_steps([p[-1] for p in new])
        # The table is the cache: keeping path texts in the encoder's cache too would
        # double the memory (~1.5 KB per distinct relation path).
        texts = [path_text(p, self.relation_text) for p in new]
        vectors = self.encoder.encode(texts, cache=False)
        for p in new:
            rows[p] = len(rows)
        self._row_path += new
        self._paths.append(vectors)
        self._project("paths", vectors)
        self._path_last.append(np.array([self._step_row[p[-1]] for p in new]))
        return np.array([rows[p] for p in paths], dtype=np.int64)

    # ---- costs ------------------------------------------------------------------------

    def _x(self, q_rows: np.ndarray, p_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """x (n, 3) = [s(q, r_t), s(q, p), rho] and the last steps' rows."""
        q = self._q.view[q_rows]
        s_rows = self._path_last.view[p_rows]
        x = np.empty((len(p_rows), 3), dtype=np.float32)
        x[:, 0] = row_dots(q, self._steps.view[s_rows])
        x[:, 1] = row_dots(q, self._paths.view[p_rows])
        x[:, 2] = self._step_rho.view[s_rows]
        return x, s_rows

    def features_rows(self, q_rows: np.ndarray, p_rows: np.ndarray) -> tuple[np.ndarray, ...]:
        """x (n, 3) and c (n, 3*384) for (question row, path row) pairs."""
        x, s_rows = self._x(q_rows, p_rows)
        c = [self._q.view[q_rows], self._steps.view[s_rows], self._paths.view[p_rows]]
        return x, np.concatenate(c, axis=1)

    def cost_rows(self, q_rows: np.ndarray, p_rows: np.ndarray, use_net: bool = True) -> np.ndarray:
        """V for (question row, path row) pairs, float32 (n,). Training computes its own,
        differentiable costs in torch (model.rcvnet_torch.TorchTables)."""
        q_rows, p_rows = np.asarray(q_rows, np.int64), np.asarray(p_rows, np.int64)
        if self.backend == "torch":
            if self._torch is None:
                from cpr_neo4j.model.rcvnet_torch import TorchBackend

                self._torch = TorchBackend(self, self.device)
            return self._torch.costs(q_rows, p_rows, use_net)
        if not use_net or self._net is None:
            x, _ = self._x(q_rows, p_rows)
            return -(x[:, 0] + x[:, 1])
        return self._cached_costs(q_rows, p_rows)

    def _cached_costs(self, q_rows: np.ndarray, p_rows: np.ndarray) -> np.ndarray:
        """V with the net; a (question, path) pair's cost is computed once (model.costs)."""
        texts, paths = self._row_text, self._row_path
        pairs = zip(q_rows.tolist(), p_rows.tolist(), strict=True)
        keys = [(texts[q], paths[p]) for q, p in pairs]
        known = self.costs.get(keys)
        out = np.array([np.nan if v is None else v for v in known], dtype=np.float32)
        todo = [i for i, v in enumerate(known) if v is None]
        if todo:
            q_rows, p_rows = q_rows[todo], p_rows[todo]
            x, s_rows = self._x(q_rows, p_rows)
            proj = self._proj
            pre = proj["q"].view[q_rows] + proj["steps"].view[s_rows] + proj["paths"].view[p_rows]
            out[todo] = -(x[:, 0] + x[:, 1]) + self._net.head(x, pre)
            self.costs.put([keys[i] for i in todo], out[todo].tolist())
        return out

    def _ctx_rows(self, ctx: QueryContext, paths: Sequence[RelPath]) -> tuple[np.ndarray, ...]:
        p_rows = self.path_rows(paths)
        return np.full_like(p_rows, ctx.row), p_rows

    def features(self, ctx: QueryContext, paths: Sequence[RelPath]) -> tuple[np.ndarray, ...]:
        return self.features_rows(*self._ctx_rows(ctx, paths))

    def v_sem(self, ctx: QueryContext, paths: Sequence[RelPath]) -> np.ndarray:
        """-(s(q~, r_t) + s(q~, r_1:t)) per path."""
        if not paths:
            return np.zeros(0, dtype=np.float32)
        return self.cost_rows(*self._ctx_rows(ctx, paths), use_net=False)

    def score(self, ctx: QueryContext, paths: Sequence[RelPath]) -> np.ndarray:
        """V_sem + Delta per path (equals v_sem when the scorer has no net)."""
        if not paths:
            return np.zeros(0, dtype=np.float32)
        return self.cost_rows(*self._ctx_rows(ctx, paths))

    def similarity(self, texts_a: Sequence[str], texts_b: Sequence[str]) -> np.ndarray:
        """Cosine similarities (len(a), len(b)), e.g. step texts against LLM hint relations."""
        return product(self.encoder.encode(texts_a), self.encoder.encode(texts_b).T)

    def step_texts(self, steps: Sequence[Step]) -> list[str]:
        return [step_text(s, self.relation_text) for s in steps]

    # ---- identity ---------------------------------------------------------------------

    def identity(self) -> dict:
        """Everything that changes a score, apart from the weights."""
        ident: dict = {
            "encoder": self.encoder.model_name,
            "text_format": TEXT_FORMAT,
            "relation_text": dict(sorted(self.relation_text.items())),
        }
        if self._net is not None:  # rho only reaches the score through the net
            ident["rho"] = dict(sorted(self.rho.items()))
            ident["net"] = self._net.config.to_dict()
        return ident

    @property
    def model_id(self) -> str:
        """Content hash: 'vsem-…' without a net, 'rcv-…' with one (weights included)."""
        digest = hashlib.sha256(json.dumps(self.identity(), sort_keys=True).encode())
        if self._net is None:
            return f"vsem-{digest.hexdigest()[:16]}"
        self._net.digest_into(digest)
        return f"rcv-{digest.hexdigest()[:16]}"
