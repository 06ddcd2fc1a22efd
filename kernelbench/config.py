"""DeepSeek-V4 model configurations (SPEC section 1) and the tensor-parallel shape helpers.

Letters used across reference/, kernels/ and the decoder:
    T tokens in a step (= batch B at decode), D hidden, H heads, Hl heads per TP rank,
    Dh head_dim (512), R rope dims (64), Qr q_lora_rank, G o_groups, Gl groups per rank, O o_lora_rank,
    E routed experts, El experts per rank, F moe_inter_dim, K top-k, V vocab, Vl vocab per rank,
    W window, L a sequence's length (position p = L - 1), S4 = (p+1)//4 compressed entries.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path


def divide(numerator: int, denominator: int) -> int:
    """Exact division; tensor-parallel splits must be even."""
    if denominator <= 0 or numerator % denominator:
        raise ValueError(f"{numerator} is not divisible by {denominator}")
    return numerator // denominator


@dataclass(frozen=True)
class ModelConfig:
    name: str
    dim: int
    n_layers: int
    n_heads: int
    head_dim: int
    rope_head_dim: int
    q_lora_rank: int
    o_groups: int
    o_lora_rank: int
    window_size: int
    compress_ratios: tuple[int, ...]  # n_layers + n_mtp entries; the last n_mtp are the MTP layers'
    vocab_size: int
    n_routed_experts: int
    n_shared_experts: int
    n_activated_experts: int
    moe_inter_dim: int
    n_hash_layers: int
    route_scale: float
    swiglu_limit: float
    index_n_heads: int
    index_head_dim: int
    index_topk: int
    hc_mult: int = 4
    hc_sinkhorn_iters: int = 20
    hc_eps: float = 1e-6
    norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    compress_rope_theta: float = 160000.0
    yarn_factor: float = 16.0
    yarn_original_seq_len: int = 65536
    yarn_beta_fast: float = 32.0
    yarn_beta_slow: float = 1.0
    max_position_embeddings: int = 1048576
    n_mtp_layers: int = 1
    score_func: str = "sqrtsoftplus"
    fp8_block: int = 128      # weight block (128x128) and activation group
    fp4_group: int = 32       # FP4 expert weight / activation group
    kv_fp8_group: int = 64    # in-place FP8 simulation of the KV nope dims

    def __post_init__(self):
        if len(self.compress_ratios) != self.n_layers + self.n_mtp_layers:
            raise ValueError(
                f"{self.name}: compress_ratios has {len(self.compress_ratios)} entries, "
                f"expected n_layers + n_mtp_layers = {self.n_layers + self.n_mtp_layers}")
        for r in self.compress_ratios:
            if r not in (0, 4) and (r < 4 or r % 4):
                raise ValueError(f"{self.name}: compress ratio {r} must be 0, 4 or a multiple of 4")
        if self.n_heads % self.o_groups:
            raise ValueError(f"{self.name}: n_heads {self.n_heads} not divisible by o_groups {self.o_groups}")
        if self.rope_head_dim % 2 or self.rope_head_dim > self.head_dim:
            raise ValueError(f"{self.name}: bad rope_head_dim {self.rope_head_dim}")
        if self.n_activated_experts > self.n_routed_experts:
            raise ValueError(f"{self.name}: top-k {self.n_activated_experts} > experts {self.n_routed_experts}")
        if self.score_func != "sqrtsoftplus":
            raise ValueError(f"{self.name}: only score_func 'sqrtsoftplus' is specified, got {self.score_func!r}")
        for what, n in (("dim", self.dim), ("q_lora_rank", self.q_lora_rank), ("moe_inter_dim", self.moe_inter_dim),
                        ("o_lora_rank", self.o_lora_rank)):
            if n % self.fp8_block:
                raise ValueError(f"{self.name}: {what}={n} must be a multiple of the FP8 block {self.fp8_block}")

    # derived sizes -------------------------------------------------------------------------
    @property
    def nope_head_dim(self) -> int:
        return self.head_dim - self.rope_head_dim

    @property
    def heads_per_group(self) -> int:
        return self.n_heads // self.o_groups

    @property
    def mhc_dim(self) -> int:
        """Width of the mHC projection: 4 pre + 4 post + 16 comb for hc_mult = 4."""
        return (2 + self.hc_mult) * self.hc_mult

    def layer_kind(self, layer: int) -> str:
        r = self.compress_ratios[layer]
        return "swa" if r == 0 else ("csa" if r == 4 else "hca")

    def check_tp(self, tp: int) -> None:
        for what, n in (("n_heads", self.n_heads), ("o_groups", self.o_groups),
                        ("n_routed_experts", self.n_routed_experts), ("vocab_size", self.vocab_size),
                        ("index_n_heads", self.index_n_heads)):
            if n % tp:
                raise ValueError(f"{self.name}: {what}={n} is not divisible by TP={tp}")

    def replace(self, **changes) -> "ModelConfig":
        return dataclasses.replace(self, **changes)

    # Hugging Face style config.json (SPEC section 5) --------------------------------------
    def to_hf(self) -> dict:
        return {
            "model_name": self.name,
            "hidden_size": self.dim, "num_hidden_layers": self.n_layers,
            "num_attention_heads": self.n_heads, "num_key_value_heads": 1, "head_dim": self.head_dim,
            "qk_rope_head_dim": self.rope_head_dim, "q_lora_rank": self.q_lora_rank,
            "o_groups": self.o_groups, "o_lora_rank": self.o_lora_rank, "sliding_window": self.window_size,
            "compress_ratios": list(self.compress_ratios), "compress_rope_theta": self.compress_rope_theta,
            "rope_theta": self.rope_theta,
            "rope_scaling": {"type": "yarn", "factor": self.yarn_factor,
                             "original_max_position_embeddings": self.yarn_original_seq_len,
                             "beta_fast": self.yarn_beta_fast, "beta_slow": self.yarn_beta_slow},
            "max_position_embeddings": self.max_position_embeddings, "vocab_size": self.vocab_size,
            "n_routed_experts": self.n_routed_experts, "n_shared_experts": self.n_shared_experts,
            "num_experts_per_tok": self.n_activated_experts, "moe_intermediate_size": self.moe_inter_dim,
            "num_hash_layers": self.n_hash_layers, "scoring_func": self.score_func, "topk_method": "noaux_tc",
            "norm_topk_prob": True, "routed_scaling_factor": self.route_scale, "swiglu_limit": self.swiglu_limit,
            "index_n_heads": self.index_n_heads, "index_head_dim": self.index_head_dim,
            "index_topk": self.index_topk, "hc_mult": self.hc_mult, "hc_sinkhorn_iters": self.hc_sinkhorn_iters,
            "hc_eps": self.hc_eps, "rms_norm_eps": self.norm_eps, "num_nextn_predict_layers": self.n_mtp_layers,
            "bos_token_id": 0, "eos_token_id": 1,
            "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0",
                                    "weight_block_size": [self.fp8_block, self.fp8_block],
                                    "activation_scheme": "dynamic"},
        }

    @classmethod
    def from_hf(cls, hf: dict, name: str | None = None) -> "ModelConfig":
        required = ["hidden_size", "num_hidden_layers", "num_attention_heads", "head_dim", "qk_rope_head_dim",
                    "q_lora_rank", "o_groups", "o_lora_rank", "sliding_window", "compress_ratios", "vocab_size",
                    "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "index_n_heads",
                    "index_head_dim", "index_topk"]
        missing = [k for k in required if k not in hf]
        if missing:
            raise ConfigError(f"config.json is missing keys: {', '.join(missing)}")
        _check_hf(hf)
        rs = hf.get("rope_scaling") or {}
        q = hf.get("quantization_config") or {}
        block = (q.get("weight_block_size") or [128, 128])[0]
        return cls(
            name=name or hf.get("model_name", "checkpoint"), dim=hf["hidden_size"],
            n_layers=hf["num_hidden_layers"], n_heads=hf["num_attention_heads"], head_dim=hf["head_dim"],
            rope_head_dim=hf["qk_rope_head_dim"], q_lora_rank=hf["q_lora_rank"], o_groups=hf["o_groups"],
            o_lora_rank=hf["o_lora_rank"], window_size=hf["sliding_window"],
            compress_ratios=tuple(hf["compress_ratios"]), vocab_size=hf["vocab_size"],
            n_routed_experts=hf["n_routed_experts"], n_shared_experts=hf.get("n_shared_experts", 1),
            n_activated_experts=hf["num_experts_per_tok"], moe_inter_dim=hf["moe_intermediate_size"],
            n_hash_layers=hf.get("num_hash_layers", 0), route_scale=hf.get("routed_scaling_factor", 1.0),
            swiglu_limit=hf.get("swiglu_limit", 10.0), index_n_heads=hf["index_n_heads"],
            index_head_dim=hf["index_head_dim"], index_topk=hf["index_topk"], hc_mult=hf.get("hc_mult", 4),
            hc_sinkhorn_iters=hf.get("hc_sinkhorn_iters", 20), hc_eps=hf.get("hc_eps", 1e-6),
            norm_eps=hf.get("rms_norm_eps", 1e-6), rope_theta=hf.get("rope_theta", 10000.0),
            compress_rope_theta=hf.get("compress_rope_theta", 160000.0),
            yarn_factor=rs.get("factor", 16.0),
            yarn_original_seq_len=rs.get("original_max_position_embeddings", 65536),
            yarn_beta_fast=rs.get("beta_fast", 32.0), yarn_beta_slow=rs.get("beta_slow", 1.0),
            max_position_embeddings=hf.get("max_position_embeddings", 1048576),
            n_mtp_layers=hf.get("num_nextn_predict_layers", 1), score_func=hf.get("scoring_func", "sqrtsoftplus"),
            fp8_block=block,
        )

    @classmethod
    def load(cls, path: str | Path) -> "ModelConfig":
        path = Path(path)
        if path.is_dir():
            path = path / "config.json"
        try:
            hf = json.loads(path.read_text())
        except FileNotFoundError:
            raise FileNotFoundError(f"no config.json at {path}") from None
        except json.JSONDecodeError as e:
            raise ValueError(f"{path} is not valid JSON: {e}") from None
        return cls.from_hf(hf, name=hf.get("model_name", path.parent.name))


class ConfigError(ValueError):
    """A config.json the model cannot run, naming the field."""


# config.json fields the model reads: integers >= 1 (or >= 0 where zero means "none"), positive numbers
_HF_INTS = {k: 1 for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "head_dim", "qk_rope_head_dim",
                           "q_lora_rank", "o_groups", "o_lora_rank", "sliding_window", "vocab_size",
                           "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "index_n_heads",
                           "index_head_dim", "index_topk", "hc_mult", "hc_sinkhorn_iters",
                           "max_position_embeddings", "n_shared_experts")}
_HF_INTS.update(num_hash_layers=0, num_nextn_predict_layers=0)
_HF_FLOATS = ("routed_scaling_factor", "swiglu_limit", "hc_eps", "rms_norm_eps", "rope_theta", "compress_rope_theta")
_QUANT = {"quant_method": "fp8", "fmt": "e4m3", "scale_fmt": "ue8m0"}   # what the kernels and loader implement


def _check_hf(hf: dict) -> None:
    """Types and ranges of the config.json fields the model reads (ConfigError names the field)."""
    def bad(field, value, what):
        raise ConfigError(f"config.json: {field} must be {what}, got {value!r}")
    for k, lo in _HF_INTS.items():
        v = hf.get(k, lo)
        if isinstance(v, bool) or not isinstance(v, int) or v < lo:
            bad(k, v, "an integer >= 1" if lo else "an integer >= 0")
    for k in _HF_FLOATS:
        v = hf.get(k, 1.0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0 or v != v or v == float("inf"):
            bad(k, v, "a positive number")
    ratios = hf["compress_ratios"]
    if not isinstance(ratios, list) or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 0 for r in ratios):
        bad("compress_ratios", ratios, "a list of integers >= 0")
    rs = hf.get("rope_scaling") or {}
    if not isinstance(rs, dict):
        bad("rope_scaling", rs, "an object")
    q = hf.get("quantization_config") or {}
    if not isinstance(q, dict):
        bad("quantization_config", q, "an object")
    for k, want in _QUANT.items():
        if k in q and q[k] != want:
            bad(f"quantization_config.{k}", q[k], f"{want!r} (the only format the model implements)")
    block = q.get("weight_block_size", [128, 128])
    if not (isinstance(block, list) and len(block) == 2 and block[0] == block[1] and isinstance(block[0], int)
            and not isinstance(block[0], bool) and block[0] > 0):
        bad("quantization_config.weight_block_size", block, "[B, B] with one positive integer B")
    if hf["num_experts_per_tok"] > hf["n_routed_experts"]:
        bad("num_experts_per_tok", hf["num_experts_per_tok"], f"<= n_routed_experts ({hf['n_routed_experts']})")


def _flash_ratios() -> tuple[int, ...]:
    return (0, 0) + tuple(4 if i % 2 == 0 else 128 for i in range(41)) + (0,)


def _pro_ratios() -> tuple[int, ...]:
    return (128, 128) + tuple(4 if i % 2 == 0 else 128 for i in range(59)) + (0,)


FLASH = ModelConfig(
    name="flash", dim=4096, n_layers=43, n_heads=64, head_dim=512, rope_head_dim=64, q_lora_rank=1024,
    o_groups=8, o_lora_rank=1024, window_size=128, compress_ratios=_flash_ratios(), vocab_size=129280,
    n_routed_experts=256, n_shared_experts=1, n_activated_experts=6, moe_inter_dim=2048, n_hash_layers=3,
    route_scale=1.5, swiglu_limit=10.0, index_n_heads=64, index_head_dim=128, index_topk=512,
)

PRO = ModelConfig(
    name="pro", dim=7168, n_layers=61, n_heads=128, head_dim=512, rope_head_dim=64, q_lora_rank=1536,
    o_groups=16, o_lora_rank=1024, window_size=128, compress_ratios=_pro_ratios(), vocab_size=129280,
    n_routed_experts=384, n_shared_experts=1, n_activated_experts=6, moe_inter_dim=3072, n_hash_layers=3,
    route_scale=2.5, swiglu_limit=10.0, index_n_heads=64, index_head_dim=128, index_topk=1024,
)

# Same structure, CPU-sized: every layer kind (SWA, CSA, HCA with ratio 8), hash and score routing,
# mHC and MTP. Dimensions stay multiples of the 128 FP8 block and the 32 FP4 group.
TINY = ModelConfig(
    name="tiny", dim=256, n_layers=5, n_heads=4, head_dim=128, rope_head_dim=64, q_lora_rank=128,
    o_groups=2, o_lora_rank=128, window_size=16, compress_ratios=(0, 4, 8, 4, 0, 0), vocab_size=1024,
    n_routed_experts=16, n_shared_experts=1, n_activated_experts=2, moe_inter_dim=128, n_hash_layers=1,
    route_scale=1.5, swiglu_limit=10.0, index_n_heads=4, index_head_dim=128, index_topk=8,
    max_position_embeddings=4096, yarn_original_seq_len=256, kv_fp8_group=64,
)

CONFIGS: dict[str, ModelConfig] = {c.name: c for c in (FLASH, PRO, TINY)}


def get_config(name: str) -> ModelConfig:
    try:
        return CONFIGS[name]
    except KeyError:
        raise ValueError(f"unknown configuration {name!r}; known: {', '.join(CONFIGS)}") from None


# Decode shape sets: the per-rank shapes a TP deployment runs, at the batch sizes that matter.
BATCHES = (1, 16, 64)
CONTEXTS = (512, 8192, 65536, 1048576)


@dataclass(frozen=True)
class ShapeSet:
    name: str
    config: ModelConfig
    tp: int
    batches: tuple[int, ...] = BATCHES
    contexts: tuple[int, ...] = (512,)


SHAPE_SETS: dict[str, ShapeSet] = {
    "flash-tp8": ShapeSet("flash-tp8", FLASH, 8),
    "flash-tp1": ShapeSet("flash-tp1", FLASH, 1),
    "pro-tp8": ShapeSet("pro-tp8", PRO, 8),
    "pro-tp1": ShapeSet("pro-tp1", PRO, 1),
    "flash-tp8-long": ShapeSet("flash-tp8-long", FLASH, 8, contexts=CONTEXTS),
    "tiny": ShapeSet("tiny", TINY, 1, batches=(1, 3)),
}


def get_shape_set(name: str) -> ShapeSet:
    try:
        return SHAPE_SETS[name]
    except KeyError:
        raise ValueError(f"unknown shape set {name!r}; known: {', '.join(SHAPE_SETS)}") from None
