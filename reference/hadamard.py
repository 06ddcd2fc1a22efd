"""Hadamard rotation of 128-wide vectors (SPEC 3.4, the indexer's q and keys): y = x @ H_128 / sqrt(128).

H is the Sylvester matrix: H_1 = [1], H_2n = [[H_n, H_n], [H_n, -H_n]], i.e. H[i, j] =
(-1)^popcount(i & j). It is symmetric and H @ H = n * I, so the scaled rotation is its own inverse.
DeepSeek applies it with `fast_hadamard_transform(x, scale=d**-0.5)`, which is this same matrix.
"""
from __future__ import annotations

from functools import lru_cache

import torch

from kernelbench.reference.precision import acc


@lru_cache(maxsize=16)
def _sylvester(n: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    if n < 1 or n & (n - 1):
        raise ValueError(f"Sylvester Hadamard size must be a power of two, got {n}")
    h = torch.ones(1, 1, dtype=dtype)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h.to(device)


def sylvester(n: int, dtype: torch.dtype = torch.float32, device: str | torch.device = "cpu") -> torch.Tensor:
    """The unscaled n x n Sylvester Hadamard matrix of +-1 entries. Cached per device, so a call
    after the first copies nothing to the device (CUDA-graph capturable)."""
    return _sylvester(n, dtype, str(torch.device(device)))


def hadamard(x: torch.Tensor) -> torch.Tensor:
    """x [..., 128] bf16 -> x @ H_128 / sqrt(128), bf16."""
    if x.dim() < 1 or x.shape[-1] != 128:
        raise ValueError(f"hadamard: last dim must be 128, got shape {tuple(x.shape)}")
    xa = acc(x)
    h = sylvester(128, xa.dtype, xa.device)
    return ((xa @ h) * 128 ** -0.5).to(x.dtype)
