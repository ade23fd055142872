"""RCVNet as a torch module, and the scorer's tables mirrored to a torch device.

Imported by training (model.train) and by the torch backend of PathScorer (`device="cuda"`)
only: scoring on a CPU never loads torch. Same parameter names as model.rcvnet.RCVWeights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch
from torch import nn

from cpr_neo4j.model.rcvnet import RCVConfig, RCVWeights

if TYPE_CHECKING:
    from cpr_neo4j.model.scorer import PathScorer


class RCVNet(nn.Module):
    """MLP on x whose hidden layers are FiLM-modulated by a 2-layer conditioner on c.

    h_l = relu((W_l h_{l-1} + b_l) * (1 + gamma_l(c)) + beta_l(c)), l = 1..layers (FiLM before
    the ReLU, as in the FiLM paper); Delta = w.h + b with w, b = 0 at init, so an untrained
    net leaves V = V_sem exactly.
    """

    def __init__(self, config: RCVConfig | None = None, seed: int = 0):
        super().__init__()
        self.config = config or RCVConfig()
        # Seeded init without touching the global RNG: same seed -> same net -> same model id.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            self._build()

    def _build(self) -> None:
        cfg = self.config
        dims = [cfg.x_dim] + [cfg.hidden] * cfg.layers
        self.hidden = nn.ModuleList(nn.Linear(a, b) for a, b in zip(dims, dims[1:], strict=False))
        # One conditioner emits (gamma, beta) for every layer: 2 * layers * hidden outputs.
        self.conditioner = nn.Sequential(
            nn.Linear(cfg.c_dim, cfg.cond_hidden),
            nn.ReLU(),
            nn.Linear(cfg.cond_hidden, 2 * cfg.layers * cfg.hidden),
        )
        self.out = nn.Linear(cfg.hidden, 1)
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    @classmethod
    def from_weights(cls, weights: RCVWeights) -> RCVNet:
        net = cls(weights.config)
        net.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in weights.params.items()})
        return net

    def to_weights(self) -> RCVWeights:
        return RCVWeights.from_module(self)

    def film(self, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(gamma, beta), each (n, layers, hidden)."""
        cfg = self.config
        gb = self.conditioner(c).view(-1, cfg.layers, 2, cfg.hidden)
        return gb[:, :, 0], gb[:, :, 1]

    def forward(self, x: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        """x (n, 3), c (n, 1152) -> Delta (n,)."""
        gamma, beta = self.film(c)
        h = x
        for i, layer in enumerate(self.hidden):
            h = torch.relu(layer(h) * (1 + gamma[:, i]) + beta[:, i])
        return self.out(h).squeeze(-1)


def state_digest(net: nn.Module, digest) -> None:
    """The training side's hash of a state_dict (what RCVWeights.digest_into must equal)."""
    for name, tensor in sorted(net.state_dict().items()):
        digest.update(name.encode())
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())


class _DeviceRows:
    """A capacity-doubling tensor on a device, appended to from a numpy table."""

    def __init__(self, device: torch.device):
        self.device = device
        self.data: torch.Tensor | None = None
        self.size = 0

    def sync(self, table: np.ndarray) -> torch.Tensor:
        need = len(table)
        if self.data is None or need > len(self.data):
            cap = max(need, 64, 2 * (len(self.data) if self.data is not None else 0))
            grown = torch.zeros((cap, *table.shape[1:]), dtype=_dtype(table), device=self.device)
            if self.data is not None:
                grown[: self.size] = self.data[: self.size]
            self.data = grown
        if need > self.size:
            self.data[self.size : need] = torch.from_numpy(table[self.size : need]).to(self.device)
            self.size = need
        return self.data[:need]


def _dtype(table: np.ndarray) -> torch.dtype:
    return torch.long if table.dtype.kind in "iu" else torch.float32


class TorchTables:
    """The scorer's question / step / path tables on `device`, kept in step with it (rows
    are only ever appended), and costs computed there: differentiable in the net."""

    NAMES = ("q", "steps", "step_rho", "paths", "path_last")

    def __init__(self, scorer: PathScorer, device: str | torch.device):
        self.scorer = scorer
        self.device = torch.device(device)
        self._rows = {name: _DeviceRows(self.device) for name in self.NAMES}

    def views(self) -> dict[str, torch.Tensor]:
        tables = self.scorer.tables()
        return {name: self._rows[name].sync(tables[name]) for name in self.NAMES}

    def features(
        self, q_rows: torch.Tensor, p_rows: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        t = self.views()
        q = t["q"][q_rows]
        s_rows = t["path_last"][p_rows]
        r, p = t["steps"][s_rows], t["paths"][p_rows]
        x = torch.stack([(q * r).sum(-1), (q * p).sum(-1), t["step_rho"][s_rows]], dim=-1)
        return x, torch.cat([q, r, p], dim=-1)

    def costs(self, net: RCVNet | None, q_rows: torch.Tensor, p_rows: torch.Tensor) -> torch.Tensor:
        x, c = self.features(q_rows, p_rows)
        v_sem = -(x[:, 0] + x[:, 1])
        return v_sem if net is None else v_sem + net(x, c)


class TorchBackend:
    """PathScorer's costs on a torch device (the CUDA scorer): tables mirrored there and
    the net as a torch module, built from the scorer's numpy weights."""

    def __init__(self, scorer: PathScorer, device: str):
        self.tables = TorchTables(scorer, device)
        weights = scorer.net
        self.net = None if weights is None else RCVNet.from_weights(weights).to(device).eval()

    @torch.inference_mode()
    def costs(self, q_rows: np.ndarray, p_rows: np.ndarray, use_net: bool) -> np.ndarray:
        dev = self.tables.device
        q, p = torch.from_numpy(q_rows).to(dev), torch.from_numpy(p_rows).to(dev)
        out = self.tables.costs(self.net if use_net else None, q, p)
        return out.float().cpu().numpy()
