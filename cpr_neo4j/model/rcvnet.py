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
from dataclasses import asdict, dataclass, replace
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
    # nets trained apart (own seed each), Delta their mean: an ensemble (model.train)
    members: int = 1

    def to_dict(self) -> dict[str, int]:
        d = asdict(self)
        if self.members == 1:  # a single net keeps the config (and so the model id) it had
            del d["members"]
        return d

    def member(self) -> RCVConfig:
        return replace(self, members=1)

    @property
    def pre_width(self) -> int:
        """Width of the conditioner's first-layer output, every member side by side."""
        return self.cond_hidden * self.members

    def shapes(self) -> dict[str, tuple[int, ...]]:
        """Parameter name -> shape, as torch's nn.Linear stores them (out, in); an ensemble's
        as its torch module (`members.K.` before each member's names)."""
        if self.members > 1:
            one = self.member().shapes()
            return {f"members.{k}.{n}": s for k in range(self.members) for n, s in one.items()}
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

    @functools.cached_property
    def members(self) -> tuple[RCVWeights, ...]:
        """Each member's weights (an ensemble), else this net alone."""
        n = self.config.members
        if n == 1:
            return (self,)
        one = self.config.member()
        return tuple(
            RCVWeights({k: self.params[f"members.{i}.{k}"] for k in one.shapes()}, one)
            for i in range(n)
        )

    def first_layer_parts(self) -> tuple[ExactMatrix, ExactMatrix, ExactMatrix, np.ndarray]:
        """The conditioner's first layer split by the blocks of c = [q, r, p]: (W_q, W_r, W_p)
        as (384, pre_width) exact matrices (model.exact) and the bias, so that c W^T + b =
        q W_q + r W_r + p W_p + b can be cached per question, step and path row. An
        ensemble's members sit side by side (columns are rounded apart: the same bits)."""
        w_q, w_r, w_p = self._parts
        bias = np.concatenate([m.params["conditioner.0.bias"] for m in self.members])
        return w_q, w_r, w_p, bias

    @functools.cached_property
    def _parts(self) -> tuple[ExactMatrix, ...]:
        w = np.concatenate([m.params["conditioner.0.weight"] for m in self.members]).T
        d = self.config.c_dim // 3
        return tuple(ExactMatrix(w[i * d : (i + 1) * d]) for i in range(3))

    @functools.cached_property
    def _t(self) -> dict[str, ExactMatrix]:
        """Each weight matrix transposed (in, out) and split once for exact products."""
        return {k: ExactMatrix(v.T) for k, v in self.params.items() if k.endswith("weight")}

    def head(self, x: np.ndarray, pre: np.ndarray) -> np.ndarray:
        """Delta (n,) from x (n, 3) and the conditioner's first-layer output `pre` (n, pre_width).
        Every product is exact up to one rounding (model.exact), so each row's result is the
        same bits whatever rows come with it, whatever the threads, BLAS kernel or CPU. An
        ensemble's Delta is its members' mean, summed in member order; `pre` holds theirs
        side by side."""
        if self.config.members > 1:
            width = self.config.cond_hidden
            total = np.zeros(len(x), dtype=np.float32)
            for i, m in enumerate(self.members):
                total += m.head(x, pre[:, i * width : (i + 1) * width])
            return total / np.float32(len(self.members))
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
        c = c.astype(np.float32, copy=False)
        if self.config.members > 1:
            pre = np.concatenate([m._pre(c) for m in self.members], axis=1)
            return self.head(x, pre)
        return self.head(x, self._pre(c))

    def _pre(self, c: np.ndarray) -> np.ndarray:
        return self._t["conditioner.0.weight"].times(c) + self.params["conditioner.0.bias"]


def __getattr__(name: str) -> Any:
    if name == "RCVNet":  # the torch module: training and the CUDA scorer only
        from cpr_neo4j.model.rcvnet_torch import RCVNet

        return RCVNet
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
