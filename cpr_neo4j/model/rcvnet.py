"""RCVNet: the residual Delta_theta(x(p), c(p)) added to the semantic cost V_sem(p).

Here: its configuration, its weights as numpy arrays (named as the torch module's
state_dict, saved as weights.npz) and the forward pass in numpy, so scoring needs no torch.
The torch module that trains them lives in model.rcvnet_torch; `RCVNet` imported from here
resolves to it (and imports torch) only when asked for.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cpr_neo4j.model.exact import ExactMatrix


@dataclass(frozen=True)
class RCVConfig:
    x_dim: int = 3  # [s(q~, r_t), s(q~, r_1:t), rho_{r_t}]
    c_dim: int = 3 * 384  # concat(q_emb, r_emb, p_emb)
    hidden: int = 256
    layers: int = 3
    cond_hidden: int = 256

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Parameter name -> shape, as torch's nn.Linear stores them (out, in)."""
        dims = [self.x_dim] + [self.hidden] * self.layers
        out: dict[str, tuple[int, ...]] = {}
        for i, (a, b) in enumerate(zip(dims, dims[1:], strict=False)):
            out[f"hidden.{i}.weight"], out[f"hidden.{i}.bias"] = (b, a), (b,)
        out["conditioner.0.weight"] = (self.cond_hidden, self.c_dim)
        out["conditioner.0.bias"] = (self.cond_hidden,)
        out["conditioner.2.weight"] = (2 * self.layers * self.hidden, self.cond_hidden)
        out["conditioner.2.bias"] = (2 * self.layers * self.hidden,)
        out["out.weight"], out["out.bias"] = (1, self.hidden), (1,)
        return out


class RCVWeights:
    """Trained RCVNet parameters (float32, C-contiguous, read-only) and the numpy forward.

    h_l = relu((W_l h_{l-1} + b_l) * (1 + gamma_l(c)) + beta_l(c)), l = 1..layers (FiLM before
    the ReLU); (gamma, beta) from a Linear-ReLU-Linear conditioner on c; Delta = w.h + b."""

    def __init__(self, params: Mapping[str, Any], config: RCVConfig | None = None):
        self.config = config or RCVConfig()
        want = self.config.shapes()
        if set(params) != set(want):
            raise ValueError(f"RCVNet parameters {sorted(params)} are not {sorted(want)}")
        self.params: dict[str, np.ndarray] = {}
        for name in sorted(want):
            array = np.ascontiguousarray(np.asarray(params[name], dtype=np.float32))
            if array.shape != want[name]:
                raise ValueError(f"{name} has shape {array.shape}, not {want[name]}")
            array.setflags(write=False)  # shared by scorers and caches: never edited in place
            self.params[name] = array

    @classmethod
    def from_module(cls, module: Any) -> RCVWeights:
        """From a torch RCVNet (or anything with `config` and a torch-like state_dict)."""
        state = module.state_dict()
        return cls({k: v.detach().cpu().numpy() for k, v in state.items()}, module.config)

    def state_dict(self) -> dict[str, np.ndarray]:
        return dict(self.params)

    def replace(self, changes: Mapping[str, Any]) -> RCVWeights:
        """A copy with some parameters replaced (e.g. a perturbed output layer)."""
        return RCVWeights({**self.params, **changes}, self.config)

    def digest_into(self, digest: Any) -> None:
        """Name and bytes of every parameter in name order: the training side's hash of its
        state_dict gives the same bytes (float32, contiguous)."""
        for name, array in sorted(self.params.items()):
            digest.update(name.encode())
            digest.update(array.tobytes())

    # ---- files ------------------------------------------------------------------------

    def save(self, path: Path) -> None:
        """weights.npz, written beside and renamed: a reader never sees half a file."""
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        with tmp.open("wb") as fh:
            np.savez(fh, **self.params)
        os.replace(tmp, path)

    @classmethod
    def load(cls, path: Path, config: RCVConfig | None = None) -> RCVWeights:
        with np.load(path, allow_pickle=False) as data:
            return cls({k: data[k] for k in data.files}, config)

    # ---- forward ----------------------------------------------------------------------

    def first_layer_parts(self) -> tuple[ExactMatrix, ExactMatrix, ExactMatrix, np.ndarray]:
        """The conditioner's first layer split by the blocks of c = [q, r, p]: (W_q, W_r, W_p)
        as (384, cond_hidden) exact matrices (model.exact) and the bias, so that c W^T + b =
        q W_q + r W_r + p W_p + b can be cached per question, step and path row."""
        w_q, w_r, w_p = self._parts
        return w_q, w_r, w_p, self.params["conditioner.0.bias"]

    @functools.cached_property
    def _parts(self) -> tuple[ExactMatrix, ...]:
        w, d = self.params["conditioner.0.weight"].T, self.config.c_dim // 3
        return tuple(ExactMatrix(w[i * d : (i + 1) * d]) for i in range(3))

    @functools.cached_property
    def _t(self) -> dict[str, ExactMatrix]:
        """Each weight matrix transposed (in, out) and split once for exact products."""
        return {k: ExactMatrix(v.T) for k, v in self.params.items() if k.endswith("weight")}

    def head(self, x: np.ndarray, pre: np.ndarray) -> np.ndarray:
        """Delta (n,) from x (n, 3) and the conditioner's first-layer output `pre` (n, cond).
        Every product is exact up to one rounding (model.exact), so each row's result is the
        same bits whatever rows come with it, whatever the threads, BLAS kernel or CPU."""
        cfg, p, t = self.config, self.params, self._t
        cond = t["conditioner.2.weight"].times(np.maximum(pre, 0)) + p["conditioner.2.bias"]
        film = cond.reshape(len(x), cfg.layers, 2, cfg.hidden)
        h = x.astype(np.float32, copy=False)
        for i in range(cfg.layers):
            z = t[f"hidden.{i}.weight"].times(h) + p[f"hidden.{i}.bias"]
            h = np.maximum(z * (1 + film[:, i, 0]) + film[:, i, 1], 0)
        return t["out.weight"].times(h)[:, 0] + p["out.bias"][0]

    def forward(self, x: np.ndarray, c: np.ndarray) -> np.ndarray:
        """x (n, 3), c (n, 1152) -> Delta (n,): the reference path, c in one product."""
        pre = self._t["conditioner.0.weight"].times(c.astype(np.float32, copy=False))
        return self.head(x, pre + self.params["conditioner.0.bias"])


def __getattr__(name: str) -> Any:
    if name == "RCVNet":  # the torch module: training and the CUDA scorer only
        from cpr_neo4j.model.rcvnet_torch import RCVNet

        return RCVNet
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
