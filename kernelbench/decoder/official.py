"""DeepSeek's official inference code (the `inference/` folder shipped with every DeepSeek-V4 checkpoint:
model.py + kernel.py), loaded by path for `kernelbench fidelity`. Never part of this repository.

`load_official(folder, kernels=...)` imports model.py under a private module name with a chosen
`kernel` module: the official kernel.py as shipped (TileLang, GPU) or kernelbench's pure-PyTorch
stand-ins (kernelbench.decoder.official_kernels). `official_model(mod, cfg, sd, ...)` builds the official
`Transformer` (one rank: world_size 1) from a kernelbench ModelConfig and the checkpoint's tensors,
doing what the official convert.py does for one model-parallel rank: wo_a dequantised to bf16 and
FP4 experts viewed as float4_e2m1fn_x2; everything else is copied into the official parameters
(which cast bf16 norms, compressor and head weights to their fp32 parameters).
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import itertools
import sys
import types
from pathlib import Path

import torch

from kernelbench.decoder import official_kernels
from kernelbench.config import ModelConfig

# the names kernel.py must provide to the official model.py
KERNEL_FUNCTIONS = ("act_quant", "fp4_act_quant", "fp8_gemm", "fp4_gemm", "sparse_attn", "hc_split_sinkhorn")
_counter = itertools.count()


class OfficialError(ValueError):
    """The official code or the checkpoint cannot be used; the message says why in one line."""


def check_folder(folder: str | Path) -> Path:
    folder = Path(folder)
    if not folder.is_dir():
        raise OfficialError(f"--official {folder}: no such directory (give the checkpoint's inference/ folder)")
    for f in ("model.py", "kernel.py"):
        if not (folder / f).is_file():
            raise OfficialError(f"--official {folder}: {f} is missing (expected DeepSeek-V4's inference/ folder)")
    return folder


def source_hash(folder: Path) -> str:
    h = hashlib.sha256()
    for f in ("model.py", "kernel.py"):
        h.update((folder / f).read_bytes())
    return h.hexdigest()[:16]


def tilelang_available() -> bool:
    return importlib.util.find_spec("tilelang") is not None


def _exec_module(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    try:
        spec.loader.exec_module(mod)
    except Exception:
        sys.modules.pop(name, None)
        raise
    return mod


@contextlib.contextmanager
def _as_module(name: str, mod: types.ModuleType | None):
    """sys.modules[name] = mod for the duration (model.py does `from kernel import ...` at import)."""
    old = sys.modules.get(name)
    if mod is not None:
        sys.modules[name] = mod
    try:
        yield
    finally:
        if old is None:
            sys.modules.pop(name, None)
        else:
            sys.modules[name] = old


def ensure_hadamard() -> bool:
    """The official rotate_activation imports fast_hadamard_transform (a CUDA package) at call time;
    where it is not installed, register the pure-PyTorch stand-in under that name. -> substituted?"""
    if "fast_hadamard_transform" in sys.modules:
        return bool(getattr(sys.modules["fast_hadamard_transform"], "KERNELBENCH_SUBSTITUTE", False))
    if importlib.util.find_spec("fast_hadamard_transform") is not None:
        return False
    sys.modules["fast_hadamard_transform"] = official_kernels.make_hadamard_module()
    return True


def load_official(folder: str | Path, kernels: str = "substitute") -> types.ModuleType:
    """Import the official model.py under a private name. kernels: "substitute" (pure PyTorch) or
    "official" (the folder's kernel.py, which needs TileLang and a GPU)."""
    folder = check_folder(folder)
    n = next(_counter)
    if kernels == "official":
        if not tilelang_available():
            raise OfficialError("the official kernels need the `tilelang` package (pip install tilelang==0.1.8); "
                                "it is not installed (use the substitutes: --kernels substitute)")
        kmod = _exec_module(f"_kb_official_kernel_{n}", folder / "kernel.py")
    elif kernels == "substitute":
        kmod = official_kernels.make_kernel_module(f"_kb_official_kernel_{n}")
    else:
        raise OfficialError(f"unknown kernels {kernels!r} (official | substitute)")
    missing = [f for f in KERNEL_FUNCTIONS if not hasattr(kmod, f)]
    if missing:
        raise OfficialError(f"{folder}/kernel.py lacks {', '.join(missing)}: not the DeepSeek-V4 inference code")
    ensure_hadamard()
    try:
        with _as_module("kernel", kmod):
            mod = _exec_module(f"_kb_official_model_{n}", folder / "model.py")
    except ImportError as e:
        raise OfficialError(f"{folder}/model.py failed to import: {e}") from None
    for attr in ("ModelArgs", "Transformer", "Attention", "MoE", "Block"):
        if not hasattr(mod, attr):
            raise OfficialError(f"{folder}/model.py has no {attr}: not the DeepSeek-V4 inference code")
    mod.KERNELS = kernels
    return mod


def set_gemms(mod: types.ModuleType, precise: bool) -> None:
    """Swap the model's fp8/fp4 GEMMs for the substitutes with fp32 (precise=False) or fp64
    accumulation: the noise-floor run re-runs the official model with precise GEMMs."""
    k = official_kernels.make_kernel_module(precise=precise)
    mod.fp8_gemm, mod.fp4_gemm = k.fp8_gemm, k.fp4_gemm


def model_args(mod: types.ModuleType, cfg: ModelConfig, max_batch: int, max_seq_len: int):
    """The official ModelArgs for a kernelbench config (FP8 weights, UE8M0 scales, FP4 experts)."""
    for what, have, fixed in (("fp8_block", cfg.fp8_block, 128), ("fp4_group", cfg.fp4_group, 32),
                              ("kv_fp8_group", cfg.kv_fp8_group, 64)):
        if have != fixed:
            raise OfficialError(f"incompatible config {cfg.name!r}: {what}={have}, the official code fixes it at {fixed}")
    want = dict(
        max_batch_size=max_batch, max_seq_len=max_seq_len, dtype="fp8", scale_fmt="ue8m0", expert_dtype="fp4",
        scale_dtype="fp8", vocab_size=cfg.vocab_size, dim=cfg.dim, moe_inter_dim=cfg.moe_inter_dim,
        n_layers=cfg.n_layers, n_hash_layers=cfg.n_hash_layers, n_mtp_layers=cfg.n_mtp_layers, n_heads=cfg.n_heads,
        n_routed_experts=cfg.n_routed_experts, n_shared_experts=cfg.n_shared_experts,
        n_activated_experts=cfg.n_activated_experts, score_func=cfg.score_func, route_scale=cfg.route_scale,
        swiglu_limit=cfg.swiglu_limit, q_lora_rank=cfg.q_lora_rank, head_dim=cfg.head_dim,
        rope_head_dim=cfg.rope_head_dim, norm_eps=cfg.norm_eps, o_groups=cfg.o_groups, o_lora_rank=cfg.o_lora_rank,
        window_size=cfg.window_size, compress_ratios=tuple(cfg.compress_ratios),
        compress_rope_theta=cfg.compress_rope_theta, original_seq_len=cfg.yarn_original_seq_len,
        rope_theta=cfg.rope_theta, rope_factor=cfg.yarn_factor, beta_fast=cfg.yarn_beta_fast,
        beta_slow=cfg.yarn_beta_slow, index_n_heads=cfg.index_n_heads, index_head_dim=cfg.index_head_dim,
        index_topk=cfg.index_topk, hc_mult=cfg.hc_mult, hc_sinkhorn_iters=cfg.hc_sinkhorn_iters, hc_eps=cfg.hc_eps)
    fields = {f.name for f in dataclasses.fields(mod.ModelArgs)}
    unknown = sorted(set(want) - fields)
    if unknown:
        raise OfficialError(f"incompatible official ModelArgs: it has no {', '.join(unknown)} (another model version?)")
    return mod.ModelArgs(**want)


def official_state(sd: dict[str, torch.Tensor], block: int = 128) -> dict[str, torch.Tensor]:
    """Checkpoint tensors (kernelbench.decoder.checkpoint.load, TP1) -> the official model's state dict, as
    convert.py writes it for one rank: wo_a dequantised to bf16 (its scale dropped), FP4 expert
    weights viewed as float4_e2m1fn_x2."""
    out = {}
    for name, t in sd.items():
        if name.endswith("attn.wo_a.scale"):
            continue
        if name.endswith("attn.wo_a.weight"):
            s = sd[name[:-len("weight")] + "scale"].float()
            w = t.float().unflatten(0, (-1, block)).unflatten(-1, (-1, block)) * s[:, None, :, None]
            out[name] = w.flatten(2, 3).flatten(0, 1).to(torch.bfloat16)
        elif ".experts." in name and name.endswith(".weight") and t.dtype == torch.int8:
            out[name] = t.view(torch.float4_e2m1fn_x2)
        else:
            out[name] = t
    return out


@contextlib.contextmanager
def official_context(device):
    """How the official generate.py runs the model: default dtype bf16, default device = the model's."""
    prev = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        if torch.device(device).type == "cpu":      # cpu is the default already (and a device context is slow)
            yield
        else:
            with torch.device(device):
                yield
    finally:
        torch.set_default_dtype(prev)


def official_model(mod: types.ModuleType, cfg: ModelConfig, sd: dict[str, torch.Tensor], max_batch: int,
                   max_seq_len: int, device="cpu"):
    """The official Transformer with the checkpoint's tensors loaded (strictly: only the MTP block's
    aliases of the shared embedding and head may be absent)."""
    args = model_args(mod, cfg, max_batch, max_seq_len)
    with official_context(device):
        model = mod.Transformer(args)
    state = official_state(sd, cfg.fp8_block)
    missing, unexpected = model.load_state_dict(state, strict=False)
    missing = [k for k in missing if not (k.startswith("mtp.") and (".embed." in k or ".head." in k))]
    if missing or unexpected:
        what = (f"missing {missing[:3]}" if missing else "") + (f" unexpected {unexpected[:3]}" if unexpected else "")
        raise OfficialError(f"the checkpoint does not fit the official model ({len(missing)} missing, "
                            f"{len(unexpected)} unexpected tensors):{what}")
    return model.eval()
