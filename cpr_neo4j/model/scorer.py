"""Path costs V(p) = V_sem(p) + Delta_theta(x(p), c(p)) (lower = more plausible).

A path's cost depends only on (masked question, relation sequence), so everything is
keyed by RelPath: embeddings of steps and path texts live in growing tables on the
scoring device, and a batch of paths costs one dict lookup per path plus a few
tensor ops for the whole batch.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from cpr_neo4j.model.encoder import DIM, TEXT_FORMAT, default_device, path_text, step_text
from cpr_neo4j.model.rcvnet import RCVNet
from cpr_neo4j.search.base import RelPath, Step

if TYPE_CHECKING:
    from cpr_neo4j.model.encoder import TextEncoder

DEFAULT_RHO = 0.5  # mean of the Beta(1, 1) prior: a step never seen in rollouts


@dataclass(frozen=True)
class QueryContext:
    """A masked question, embedded once; `row` indexes the scorer's question table."""

    text: str
    row: int


class _Rows:
    """A growing (capacity-doubling) tensor on the scoring device."""

    def __init__(self, tail: tuple[int, ...], dtype: torch.dtype, device: torch.device):
        self.data = torch.zeros((64, *tail), dtype=dtype, device=device)
        self.size = 0

    def append(self, values: torch.Tensor) -> None:
        need = self.size + len(values)
        if need > len(self.data):
            cap = max(need, 2 * len(self.data))
            grown = torch.zeros(
                (cap, *self.data.shape[1:]), dtype=self.data.dtype, device=self.data.device
            )
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size : need] = values.to(self.data.device, self.data.dtype)
        self.size = need

    @property
    def view(self) -> torch.Tensor:
        return self.data[: self.size]


class PathScorer:
    """Scores relation paths for a masked question; `net=None` gives the V_sem-only scorer."""

    def __init__(
        self,
        encoder: TextEncoder,
        relation_text: Mapping[str, str],
        priors_rho: Mapping[str, float] | None = None,
        net: RCVNet | None = None,
        device: str | torch.device | None = None,
    ):
        self.encoder = encoder
        self.relation_text = dict(relation_text)
        self.rho = {k: float(v) for k, v in (priors_rho or {}).items()}
        self.device = torch.device(device or default_device())
        self.net = net.to(self.device) if net is not None else None
        self._questions: dict[str, QueryContext] = {}
        self._q = _Rows((DIM,), torch.float32, self.device)
        self._step_row: dict[Step, int] = {}
        self._steps = _Rows((DIM,), torch.float32, self.device)
        self._step_rho = _Rows((), torch.float32, self.device)
        self._path_row: dict[RelPath, int] = {}
        self._paths = _Rows((DIM,), torch.float32, self.device)
        self._path_last = _Rows((), torch.long, self.device)  # path row -> its last step's row

    # ---- embeddings -------------------------------------------------------------------

    def question(self, masked_text: str) -> QueryContext:
        ctx = self._questions.get(masked_text)
        return ctx if ctx is not None else self.questions([masked_text])[0]

    def questions(self, masked_texts: Sequence[str]) -> list[QueryContext]:
        """Many questions at once: unseen texts are embedded in one batch."""
        new = [t for t in dict.fromkeys(masked_texts) if t not in self._questions]
        if new:
            self._q.append(torch.from_numpy(self.encoder.encode(new)))
            for i, text in enumerate(new):
                self._questions[text] = QueryContext(text, self._q.size - len(new) + i)
        return [self._questions[t] for t in masked_texts]

    def _add_steps(self, steps: Sequence[Step]) -> None:
        new = [s for s in dict.fromkeys(steps) if s not in self._step_row]
        if not new:
            return
        vectors = self.encoder.encode([step_text(s, self.relation_text) for s in new])
        for s in new:
            self._step_row[s] = len(self._step_row)
        self._steps.append(torch.from_numpy(vectors))
        self._step_rho.append(torch.tensor([self.rho.get(s.key(), DEFAULT_RHO) for s in new]))

    def path_rows(self, paths: Sequence[RelPath]) -> torch.Tensor:
        """Row of every path in the path table (unseen paths embedded in one batch)."""
        rows = self._path_row
        try:
            return torch.tensor([rows[p] for p in paths], dtype=torch.long, device=self.device)
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
        self._paths.append(torch.from_numpy(vectors))
        self._path_last.append(torch.tensor([self._step_row[p[-1]] for p in new]))
        return torch.tensor([rows[p] for p in paths], dtype=torch.long, device=self.device)

    # ---- costs ------------------------------------------------------------------------

    def features_rows(
        self, q_rows: torch.Tensor, p_rows: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """x (n, 3) and c (n, 3*384) for (question row, path row) pairs."""
        q = self._q.view[q_rows]
        s_rows = self._path_last.view[p_rows]
        r = self._steps.view[s_rows]
        p = self._paths.view[p_rows]
        x = torch.stack([(q * r).sum(-1), (q * p).sum(-1), self._step_rho.view[s_rows]], dim=-1)
        return x, torch.cat([q, r, p], dim=-1)

    def cost_rows(
        self, q_rows: torch.Tensor, p_rows: torch.Tensor, use_net: bool = True
    ) -> torch.Tensor:
        """V for (question row, path row) pairs; differentiable in the net's weights."""
        x, c = self.features_rows(q_rows, p_rows)
        v_sem = -(x[:, 0] + x[:, 1])
        if use_net and self.net is not None:
            return v_sem + self.net(x, c)
        return v_sem

    def _ctx_rows(
        self, ctx: QueryContext, paths: Sequence[RelPath]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        p_rows = self.path_rows(paths)
        return torch.full_like(p_rows, ctx.row), p_rows

    def features(
        self, ctx: QueryContext, paths: Sequence[RelPath]
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.features_rows(*self._ctx_rows(ctx, paths))

    @torch.inference_mode()
    def v_sem(self, ctx: QueryContext, paths: Sequence[RelPath]) -> np.ndarray:
        """-(s(q~, r_t) + s(q~, r_1:t)) per path."""
        if not paths:
            return np.zeros(0, dtype=np.float32)
        return self.cost_rows(*self._ctx_rows(ctx, paths), use_net=False).cpu().numpy()

    @torch.inference_mode()
    def score(self, ctx: QueryContext, paths: Sequence[RelPath]) -> np.ndarray:
        """V_sem + Delta per path (equals v_sem when the scorer has no net)."""
        if not paths:
            return np.zeros(0, dtype=np.float32)
        return self.cost_rows(*self._ctx_rows(ctx, paths)).cpu().numpy()

    def similarity(self, texts_a: Sequence[str], texts_b: Sequence[str]) -> np.ndarray:
        """Cosine similarities (len(a), len(b)), e.g. step texts against LLM hint relations."""
        return self.encoder.encode(texts_a) @ self.encoder.encode(texts_b).T

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
        if self.net is not None:  # rho only reaches the score through the net
            ident["rho"] = dict(sorted(self.rho.items()))
            ident["net"] = self.net.config.to_dict()
        return ident

    @property
    def model_id(self) -> str:
        """Content hash: 'vsem-…' without a net, 'rcv-…' with one (weights included)."""
        digest = hashlib.sha256(json.dumps(self.identity(), sort_keys=True).encode())
        if self.net is None:
            return f"vsem-{digest.hexdigest()[:16]}"
        for name, tensor in sorted(self.net.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        return f"rcv-{digest.hexdigest()[:16]}"
