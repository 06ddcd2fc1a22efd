"""DeepSeek-V4 checkpoints in the official layout (SPEC section 5): a random writer for any config, and
a loader that shards on load for rank r of a TP layout, with errors that name the tensor.

Layout of a checkpoint directory:
    config.json                      Hugging Face style keys (ModelConfig.to_hf / from_hf)
    model.safetensors.index.json     {"metadata": {"total_size": bytes}, "weight_map": {name: shard file}}
    model-0000k-of-0000n.safetensors the shards

Formats: FP8 weights e4m3 + `.scale` float8_e8m0fnu per 128x128 block (dequant multiplier); FP4 routed
experts packed two per byte (low nibble = even element) stored as int8, `.scale` e8m0 per 32 inputs;
bf16 norms / embed / head / compressor / indexer weights_proj / gate weight; fp32 attn_sink, ape, gate
bias and every mHC parameter; int32 tid2eid.

`param_specs(cfg)` is the one table of names, full shapes, dtypes and TP splits; the writer and the
loader both read it, and the decoder consumes the loader's rank-local dict. Splits:
    column  dim 0 by heads / groups   attn.wq_b (+scale), attn.attn_sink, attn.wo_a (+scale),
                                      attn.indexer.wq_b (+scale), attn.indexer.weights_proj (only
                                      with shard_indexer=True; the decoder replicates the indexer)
    row     dim 1                     attn.wo_b (+scale)
    vocab   dim 0                     embed, head
    expert  whole tensors by index    ffn.experts.E.* (rank r keeps E in [r*E/TP, (r+1)*E/TP))
    -       replicated                everything else
"""
from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path

import torch

from kernelbench.config import ModelConfig

INDEX_FILE = "model.safetensors.index.json"
E4M3, E8M0 = torch.float8_e4m3fn, torch.float8_e8m0fnu
_ST_DTYPE = {torch.bfloat16: "BF16", torch.float32: "F32", E4M3: "F8_E4M3", E8M0: "F8_E8M0",
             torch.int8: "I8", torch.int32: "I32"}
FP4_CODE_STD = math.sqrt(sum(v * v for v in (0, .5, 1, 1.5, 2, 3, 4, 6)) / 8)   # std of a uniform e2m1 code
FP8_CODE_STD = 16.0                                                            # std of the drawn e4m3 codes


class CheckpointError(ValueError):
    """A checkpoint that cannot be loaded; the message names the tensor and/or the file."""


@dataclass(frozen=True)
class ParamSpec:
    shape: tuple[int, ...]
    dtype: torch.dtype
    split: str = "replicated"     # replicated | column | row | vocab | expert | indexer (column if sharded)
    init: str = "linear"          # how random values are drawn, see _draw
    fan_in: int = 1               # linear layers: the logical input width (std 1/sqrt(fan_in))
    expert: int = -1              # routed expert index (split == "expert")


# ------------------------------------------------------------------------------------------------
# The table of parameters
# ------------------------------------------------------------------------------------------------
def _fp8(out: dict, name: str, n: int, k: int, split: str = "replicated") -> None:
    b = 128
    out[f"{name}.weight"] = ParamSpec((n, k), E4M3, split, "fp8", fan_in=k)
    out[f"{name}.scale"] = ParamSpec((-(-n // b), -(-k // b)), E8M0, split, "fp8_scale", fan_in=k)


def _fp4(out: dict, name: str, n: int, k: int, expert: int, group: int) -> None:
    out[f"{name}.weight"] = ParamSpec((n, k // 2), torch.int8, "expert", "fp4", fan_in=k, expert=expert)
    out[f"{name}.scale"] = ParamSpec((n, k // group), E8M0, "expert", "fp4_scale", fan_in=k, expert=expert)


def _vec(out: dict, name: str, n: int, dtype=torch.bfloat16, init: str = "norm", split: str = "replicated") -> None:
    out[name] = ParamSpec((n,), dtype, split, init)


def _hc(out: dict, prefix: str, cfg: ModelConfig, head: bool = False) -> None:
    m = cfg.hc_mult if head else cfg.mhc_dim
    out[f"{prefix}_fn"] = ParamSpec((m, cfg.hc_mult * cfg.dim), torch.float32, init="hc_fn", fan_in=cfg.hc_mult * cfg.dim)
    out[f"{prefix}_base"] = ParamSpec((m,), torch.float32, init="hc_head_base" if head else "hc_base")
    out[f"{prefix}_scale"] = ParamSpec((1 if head else 3,), torch.float32, init="hc_scale")


def _compressor(out: dict, p: str, cfg: ModelConfig, ratio: int, d: int) -> None:
    c = 2 if ratio == 4 else 1
    out[f"{p}.ape"] = ParamSpec((ratio, c * d), torch.float32, init="ape")
    out[f"{p}.wkv.weight"] = ParamSpec((c * d, cfg.dim), torch.bfloat16, fan_in=cfg.dim)
    out[f"{p}.wgate.weight"] = ParamSpec((c * d, cfg.dim), torch.bfloat16, fan_in=cfg.dim)
    _vec(out, f"{p}.norm.weight", d)


def _block(out: dict, p: str, cfg: ModelConfig, layer: int) -> None:
    D, H, Dh, G, O = cfg.dim, cfg.n_heads, cfg.head_dim, cfg.o_groups, cfg.o_lora_rank
    ratio = cfg.compress_ratios[layer]
    _vec(out, f"{p}.attn_norm.weight", D)
    _vec(out, f"{p}.ffn_norm.weight", D)
    _hc(out, f"{p}.hc_attn", cfg)
    _hc(out, f"{p}.hc_ffn", cfg)
    a = f"{p}.attn"
    _vec(out, f"{a}.attn_sink", H, torch.float32, "sink", "column")
    _fp8(out, f"{a}.wq_a", cfg.q_lora_rank, D)
    _vec(out, f"{a}.q_norm.weight", cfg.q_lora_rank)
    _fp8(out, f"{a}.wq_b", H * Dh, cfg.q_lora_rank, "column")
    _fp8(out, f"{a}.wkv", Dh, D)
    _vec(out, f"{a}.kv_norm.weight", Dh)
    _fp8(out, f"{a}.wo_a", G * O, H * Dh // G, "column")
    _fp8(out, f"{a}.wo_b", D, G * O, "row")
    if ratio:
        _compressor(out, f"{a}.compressor", cfg, ratio, Dh)
    if ratio == 4:
        Hi, Di = cfg.index_n_heads, cfg.index_head_dim
        _fp8(out, f"{a}.indexer.wq_b", Hi * Di, cfg.q_lora_rank, "indexer")
        out[f"{a}.indexer.weights_proj.weight"] = ParamSpec((Hi, D), torch.bfloat16, "indexer", fan_in=D)
        _compressor(out, f"{a}.indexer.compressor", cfg, ratio, Di)
    f = f"{p}.ffn"
    E, K, F = cfg.n_routed_experts, cfg.n_activated_experts, cfg.moe_inter_dim
    out[f"{f}.gate.weight"] = ParamSpec((E, D), torch.bfloat16, fan_in=D)
    if layer < cfg.n_hash_layers:
        out[f"{f}.gate.tid2eid"] = ParamSpec((cfg.vocab_size, K), torch.int32, init="tid2eid", fan_in=E)
    else:
        _vec(out, f"{f}.gate.bias", E, torch.float32, "bias")
    for e in range(E):
        _fp4(out, f"{f}.experts.{e}.w1", F, D, e, cfg.fp4_group)
        _fp4(out, f"{f}.experts.{e}.w2", D, F, e, cfg.fp4_group)
        _fp4(out, f"{f}.experts.{e}.w3", F, D, e, cfg.fp4_group)
    for w, (n, k) in (("w1", (F, D)), ("w2", (D, F)), ("w3", (F, D))):
        _fp8(out, f"{f}.shared_experts.{w}", n, k)


def param_specs(cfg: ModelConfig) -> dict[str, ParamSpec]:
    """Every tensor of a checkpoint of `cfg`: name -> full (unsharded) shape, dtype, TP split."""
    if cfg.n_shared_experts != 1:
        raise ValueError(f"{cfg.name}: only n_shared_experts == 1 is specified, got {cfg.n_shared_experts}")
    out: dict[str, ParamSpec] = {}
    out["embed.weight"] = ParamSpec((cfg.vocab_size, cfg.dim), torch.bfloat16, "vocab", "embed")
    for layer in range(cfg.n_layers):
        _block(out, f"layers.{layer}", cfg, layer)
    for i in range(cfg.n_mtp_layers):
        p = f"mtp.{i}"
        _block(out, p, cfg, cfg.n_layers + i)
        _fp8(out, f"{p}.e_proj", cfg.dim, cfg.dim)
        _fp8(out, f"{p}.h_proj", cfg.dim, cfg.dim)
        for n in ("enorm", "hnorm", "norm"):
            _vec(out, f"{p}.{n}.weight", cfg.dim)
        _hc(out, f"{p}.hc_head", cfg, head=True)
    _vec(out, "norm.weight", cfg.dim)
    _hc(out, "hc_head", cfg, head=True)
    out["head.weight"] = ParamSpec((cfg.vocab_size, cfg.dim), torch.bfloat16, "vocab", fan_in=cfg.dim)
    return out


def shard_dim(spec: ParamSpec, shard_indexer: bool) -> int | None:
    """The dimension split across ranks, or None (replicated, or expert-wise)."""
    if spec.split in ("column", "vocab") or (spec.split == "indexer" and shard_indexer):
        return 0
    if spec.split == "row":
        return 1
    return None


def is_local(spec: ParamSpec, cfg: ModelConfig, rank: int, world: int) -> bool:
    if spec.split != "expert":
        return True
    el = cfg.n_routed_experts // world
    return rank * el <= spec.expert < (rank + 1) * el


def local_shape(name: str, spec: ParamSpec, world: int, shard_indexer: bool = False) -> tuple[int, ...]:
    dim = shard_dim(spec, shard_indexer)
    if dim is None or world == 1:
        return spec.shape
    if spec.shape[dim] % world:
        raise CheckpointError(f"tensor {name}: dimension {dim} of shape {spec.shape} is not divisible by TP={world}")
    shape = list(spec.shape)
    shape[dim] //= world
    return tuple(shape)


# ------------------------------------------------------------------------------------------------
# Random values (activations stay O(1): linear weights have std 1/sqrt(fan_in))
# ------------------------------------------------------------------------------------------------
def _draw(spec: ParamSpec, shape: tuple[int, ...], gen: torch.Generator, device="cpu") -> torch.Tensor:
    def randn(*s):
        return torch.randn(*s, generator=gen, device=device)

    def pow2_scales(s: tuple, base_std: float, code_std: float) -> torch.Tensor:
        # a power of two per block, jittered by one octave so that a loader ignoring scales is caught;
        # -0.4 octave offsets the jitter's rms gain sqrt((1/4 + 1 + 4) / 3) = 2^0.4
        e0 = round(math.log2(base_std / code_std) - 0.4)
        jitter = torch.randint(-1, 2, s, generator=gen, device=device)
        return torch.exp2((e0 + jitter).float()).to(E8M0)

    init, std = spec.init, 1.0 / math.sqrt(spec.fan_in)
    if init == "fp8":
        return (randn(*shape) * FP8_CODE_STD).clamp(-448, 448).to(E4M3)
    if init == "fp8_scale":
        return pow2_scales(shape, std, FP8_CODE_STD)
    if init == "fp4":
        codes = torch.randint(0, 16, (*shape[:-1], shape[-1] * 2), generator=gen, device=device, dtype=torch.int32)
        return (codes[..., 0::2] | (codes[..., 1::2] << 4)).to(torch.uint8).view(torch.int8)
    if init == "fp4_scale":
        return pow2_scales(shape, std, FP4_CODE_STD)
    if init == "linear":
        return (randn(*shape) * std).to(spec.dtype)
    if init == "embed":
        return randn(*shape).to(spec.dtype)
    if init == "norm":
        return (1 + 0.1 * randn(*shape)).to(spec.dtype)
    if init == "sink":
        return randn(*shape) * 0.5
    if init in ("ape", "bias"):
        return randn(*shape) * 0.1
    if init == "hc_fn":
        return randn(*shape) * std
    if init == "hc_scale":
        return 0.5 + 0.1 * randn(*shape)
    if init == "hc_head_base":
        return math.log(1 / 3) + 0.1 * randn(*shape)           # pre ~ 1/4 per stream
    if init == "hc_base":
        m = int(round(math.sqrt(shape[0] + 1) - 1))              # (2 + m) * m = 24 -> m = 4
        base = 0.1 * randn(*shape)
        base[:m] += math.log(1 / (m - 1))                        # pre_j ~ 1/m
        base[2 * m:] += torch.eye(m, device=device).flatten()    # comb leans to the identity
        return base
    if init == "tid2eid":
        # K distinct experts per token id
        return torch.rand(shape[0], spec.fan_in, generator=gen, device=device).argsort(-1)[:, :shape[1]].to(torch.int32)
    raise AssertionError(f"unknown init {init!r}")


def random_tensor(spec: ParamSpec, gen: torch.Generator, shape: tuple[int, ...] | None = None,
                  device="cpu") -> torch.Tensor:
    """A random value for one parameter (full shape unless `shape` gives a rank-local one)."""
    return _draw(spec, tuple(shape or spec.shape), gen, device)


# ------------------------------------------------------------------------------------------------
# Writer
# ------------------------------------------------------------------------------------------------
def random_local_state(cfg: ModelConfig, rank: int = 0, world: int = 1, seed: int = 0, device="cpu",
                       shard_indexer: bool = False) -> dict[str, torch.Tensor]:
    """Random rank-local tensors of a TP-`world` layout drawn directly on `device` (benchmarks of
    Flash-sized layers, no checkpoint on disk); the same names, shapes and dtypes `load` returns."""
    cfg.check_tp(world)
    gen = torch.Generator(device=device).manual_seed(seed + rank)
    return {name: random_tensor(spec, gen, local_shape(name, spec, world, shard_indexer), device)
            for name, spec in param_specs(cfg).items() if is_local(spec, cfg, rank, world)}


def random_state(cfg: ModelConfig, seed: int = 0, device="cpu") -> dict[str, torch.Tensor]:
    """The full (TP1) tensors of the random checkpoint `write_random(cfg, seed, device=device)` writes, on
    the CPU. `device` draws them (a GPU draws Flash widths in seconds; values depend on the device)."""
    gen = torch.Generator(device=device).manual_seed(seed)
    return {name: random_tensor(spec, gen, device=device).cpu() for name, spec in param_specs(cfg).items()}


def write_random(path: str | Path, cfg: ModelConfig, seed: int = 0, n_shards: int = 4, device="cpu") -> Path:
    """Write a random checkpoint of `cfg` in the official layout (several shards); returns the directory."""
    from safetensors.torch import save_file

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    state = random_state(cfg, seed, device)
    total = sum(t.numel() * t.element_size() for t in state.values())
    n_shards = max(1, min(n_shards, len(state)))
    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    for name, t in state.items():
        if size >= total / n_shards * len(shards) and len(shards) < n_shards:
            shards.append({})
        shards[-1][name] = t
        size += t.numel() * t.element_size()
    weight_map = {}
    for i, tensors in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(tensors, str(path / fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in tensors})
    (path / INDEX_FILE).write_text(json.dumps({"metadata": {"total_size": total}, "weight_map": weight_map}, indent=1))
    (path / "config.json").write_text(json.dumps(cfg.to_hf(), indent=1))
    return path


# ------------------------------------------------------------------------------------------------
# Loader
# ------------------------------------------------------------------------------------------------
def read_index(path: Path) -> dict[str, str]:
    index = path / INDEX_FILE
    if not index.exists():
        raise CheckpointError(f"{path} has no {INDEX_FILE} (the map from tensor names to shard files)")
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise CheckpointError(f"{index} is not a valid safetensors index (needs a 'weight_map'): {e}") from None
    if not isinstance(weight_map, dict):
        raise CheckpointError(f"{index}: 'weight_map' must map tensor names to shard files")
    return weight_map


def cut_config(cfg: ModelConfig, layers: int | None = None, experts: int | None = None,
               vocab: int | None = None) -> ModelConfig:
    """cfg with its widths kept and fewer layers (the first `layers`, plus the MTP layers), routed
    experts or vocabulary entries: a CPU-sized checkpoint with real GEMM reductions (issue 11's noise
    floor). The name records the cut (e.g. flash-l4-e16-v8192). Bad values raise UsageProblem."""
    from kernelbench.usage import UsageProblem
    if layers is None and experts is None and vocab is None:
        return cfg
    n = cfg.n_layers if layers is None else layers
    e = cfg.n_routed_experts if experts is None else experts
    if not 1 <= n <= cfg.n_layers:
        raise UsageProblem(f"--layers must lie in [1, {cfg.n_layers}] for {cfg.name!r}, got {n}")
    if e < cfg.n_activated_experts:
        raise UsageProblem(f"--experts must be >= the {cfg.n_activated_experts} activated experts, got {e}")
    if vocab is not None and vocab < 2:
        raise UsageProblem(f"--vocab must be >= 2, got {vocab}")
    tag = "".join(f"-{k}{v}" for k, v in (("l", layers), ("e", experts), ("v", vocab)) if v is not None)
    mtp = cfg.compress_ratios[cfg.n_layers:]
    return dataclasses.replace(cfg, name=cfg.name + tag, n_layers=n, compress_ratios=cfg.compress_ratios[:n] + mtp,
                               n_hash_layers=min(cfg.n_hash_layers, n), n_routed_experts=e,
                               vocab_size=cfg.vocab_size if vocab is None else vocab)


def make_random(path: str | Path, config: str = "tiny", seed: int = 0, shards: int = 4, force: bool = False,
                yes: bool = False, layers: int | None = None, experts: int | None = None,
                vocab: int | None = None) -> Path:
    """write_random of a named config (`kernelbench make-checkpoint`), optionally cut (cut_config), refusing
    (UsageProblem) a non-empty directory without `force` and a checkpoint over 10 GB without `yes`."""
    from kernelbench.config import get_config
    from kernelbench.usage import UsageProblem
    path = Path(path)
    if path.exists() and any(path.iterdir()) and not force:
        raise UsageProblem(f"{path} exists and is not empty (use --force to write into it)")
    cfg = cut_config(get_config(config), layers, experts, vocab)
    size = sum(math.prod(s.shape) * s.dtype.itemsize for s in param_specs(cfg).values())
    if size > 10e9 and not yes:
        raise UsageProblem(f"a {config!r} checkpoint is {size / 1e9:.0f} GB (held in memory while written); "
                           f"pass --yes to write it anyway")
    return write_random(path, cfg, seed=seed, n_shards=shards)


def load(path: str | Path, rank: int = 0, world: int = 1, device="cpu", shard_indexer: bool = False,
         config: ModelConfig | None = None) -> tuple[ModelConfig, dict[str, torch.Tensor]]:
    """Load rank `rank` of a TP-`world` layout from a checkpoint directory: the config and a dict of
    rank-local tensors (stored dtypes, nothing converted). Only this rank's slices are read.
    Raises CheckpointError naming the tensor for a missing tensor, a wrong shape or dtype, a missing
    or truncated / corrupt shard file, and naming the file for a missing or malformed index."""
    from safetensors import SafetensorError, safe_open

    path = Path(path)
    if not path.is_dir():
        raise CheckpointError(f"checkpoint directory {path} does not exist")
    try:
        cfg = config or ModelConfig.load(path)
    except (FileNotFoundError, ValueError, TypeError) as e:
        raise CheckpointError(f"{path}: bad config.json: {e}") from None
    try:
        cfg.check_tp(world)
    except ValueError as e:
        raise CheckpointError(str(e)) from None
    if not 0 <= rank < world:
        raise CheckpointError(f"rank {rank} is outside TP world {world}")
    weight_map = read_index(path)
    specs = param_specs(cfg)
    handles: dict[str, object] = {}

    def open_shard(fname: str, name: str):
        if fname not in handles:
            f = path / fname
            if not f.exists():
                raise CheckpointError(f"tensor {name}: its shard file {fname} (from {INDEX_FILE}) does not exist")
            try:
                handles[fname] = safe_open(str(f), framework="pt", device="cpu")
            except (SafetensorError, OSError) as e:
                raise CheckpointError(f"tensor {name}: shard file {fname} is truncated or corrupt ({e})") from None
        return handles[fname]

    out: dict[str, torch.Tensor] = {}
    for name, spec in specs.items():
        if not is_local(spec, cfg, rank, world):
            continue
        if name not in weight_map:
            raise CheckpointError(f"tensor {name} is missing: {INDEX_FILE} has no entry for it "
                                  f"(config {cfg.name!r} expects shape {spec.shape} {spec.dtype})")
        fname = weight_map[name]
        f = open_shard(fname, name)
        if name not in f.keys():
            raise CheckpointError(f"tensor {name} is missing from shard file {fname} (the index says it is there)")
        sl = f.get_slice(name)
        shape, dtype = tuple(sl.get_shape()), sl.get_dtype()
        if dtype != _ST_DTYPE[spec.dtype]:
            raise CheckpointError(f"tensor {name} in {fname} has dtype {dtype}, expected {_ST_DTYPE[spec.dtype]} ({spec.dtype})")
        if shape != spec.shape:
            raise CheckpointError(f"tensor {name} in {fname} has shape {shape}, config {cfg.name!r} expects {spec.shape}")
        dim = shard_dim(spec, shard_indexer)
        try:
            if dim is None or world == 1:
                t = sl[:]
            else:
                n = local_shape(name, spec, world, shard_indexer)[dim]
                t = sl[rank * n:(rank + 1) * n] if dim == 0 else sl[:, rank * n:(rank + 1) * n]
        except SafetensorError as e:
            raise CheckpointError(f"tensor {name}: reading it from {fname} failed ({e})") from None
        out[name] = t.to(device)
    return cfg, out
