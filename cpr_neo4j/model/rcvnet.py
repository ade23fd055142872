"""RCVNet: the residual Delta_theta(x(p), c(p)) added to the semantic cost V_sem(p)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class RCVConfig:
    x_dim: int = 3  # [s(q~, r_t), s(q~, r_1:t), rho_{r_t}]
    c_dim: int = 3 * 384  # concat(q_emb, r_emb, p_emb)
    hidden: int = 256
    layers: int = 3
    cond_hidden: int = 256

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


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
