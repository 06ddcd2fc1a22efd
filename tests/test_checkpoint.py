"""Checkpoints: the writer's layout, an exact round trip, TP sharding on load, and bad checkpoints."""
import json
import math

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from kernelbench.decoder import checkpoint as ck
from kernelbench.config import FLASH, TINY, ModelConfig

TP4_CFG = TINY.replace(name="tiny-g4", o_groups=4)   # TINY has 2 output groups: TP4 needs 4


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.view(torch.uint8) if t.element_size() == 1 else t


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return ck.write_random(tmp_path_factory.mktemp("ck") / "tiny", TINY, seed=7, n_shards=3)


@pytest.fixture(scope="module")
def g4_dir(tmp_path_factory):
    return ck.write_random(tmp_path_factory.mktemp("ck") / "g4", TP4_CFG, seed=3)


def copy_ckpt(src, dst):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


def test_layout_is_official(tiny_dir):
    hf = json.loads((tiny_dir / "config.json").read_text())
    assert ModelConfig.from_hf(hf) == TINY
    index = json.loads((tiny_dir / ck.INDEX_FILE).read_text())
    shards = set(index["weight_map"].values())
    assert len(shards) == 3 and all((tiny_dir / s).exists() for s in shards)
    # names and dtypes of SPEC section 5, read from the files themselves
    with safe_open(str(tiny_dir / index["weight_map"]["layers.1.attn.wq_b.weight"]), "pt") as f:
        assert f.get_slice("layers.1.attn.wq_b.weight").get_dtype() == "F8_E4M3"
        assert f.get_slice("layers.1.attn.wq_b.scale").get_dtype() == "F8_E8M0"
    names = set(index["weight_map"])
    for n in ("embed.weight", "head.weight", "norm.weight", "hc_head_fn", "hc_head_base", "hc_head_scale",
              "layers.0.ffn.gate.tid2eid", "layers.1.ffn.gate.bias", "layers.1.attn.indexer.wq_b.scale",
              "layers.1.attn.indexer.compressor.ape", "layers.2.attn.compressor.wgate.weight",
              "layers.3.ffn.experts.15.w2.scale", "layers.4.ffn.shared_experts.w3.weight",
              "mtp.0.e_proj.weight", "mtp.0.hc_head_fn", "mtp.0.attn.wo_a.scale", "mtp.0.ffn.gate.bias"):
        assert n in names, n
    assert "layers.0.ffn.gate.bias" not in names and "layers.2.attn.indexer.wq_b.weight" not in names
    assert "layers.0.attn.compressor.ape" not in names and "mtp.0.embed.weight" not in names
    # FP4 experts: int8 bytes, [out, in/2], scales [out, in/32]
    spec = ck.param_specs(TINY)
    assert spec["layers.0.ffn.experts.0.w1.weight"].shape == (TINY.moe_inter_dim, TINY.dim // 2)
    assert spec["layers.0.ffn.experts.0.w1.weight"].dtype == torch.int8
    assert spec["layers.0.ffn.experts.0.w2.scale"].shape == (TINY.dim, TINY.moe_inter_dim // 32)
    assert spec["layers.2.attn.compressor.ape"].shape == (8, TINY.head_dim)        # ratio 8: no overlap
    assert spec["layers.1.attn.compressor.ape"].shape == (4, 2 * TINY.head_dim)    # ratio 4: overlap


def test_flash_table_matches_the_published_size():
    # The V4-Flash checkpoint is about 160 GB (SPEC section 5); a wrong shape in the table shows here.
    total = sum(math.prod(s.shape) * s.dtype.itemsize for s in ck.param_specs(FLASH).values())
    assert 155e9 < total < 165e9, total / 1e9


def test_round_trip_is_exact(tiny_dir):
    written = ck.random_state(TINY, seed=7)
    cfg, loaded = ck.load(tiny_dir)
    assert cfg == TINY and set(loaded) == set(written)
    for name, t in written.items():
        assert loaded[name].dtype == t.dtype, name
        assert torch.equal(bits(loaded[name]), bits(t)), name


def test_random_values_are_sane():
    s = ck.random_state(TINY, seed=1)
    # fp8 weights dequantize to std ~ 1/sqrt(fan_in) (each block jittered by an octave on purpose);
    # block scales vary, so a loader that ignored them would be caught
    ratios = []
    for name, spec in ck.param_specs(TINY).items():
        if spec.init == "fp8":
            q, sc = s[name].float(), s[name[:-len("weight")] + "scale"].float()
            w = q * sc.repeat_interleave(128, 0)[: q.shape[0]].repeat_interleave(128, 1)[:, : q.shape[1]]
            ratios.append(w.std().item() * math.sqrt(spec.fan_in))
    assert 0.7 < torch.tensor(ratios).median().item() < 1.4
    sc = s["layers.1.ffn.shared_experts.w1.scale"].float()
    assert torch.equal(torch.exp2(torch.log2(sc).round()), sc) and sc.unique().numel() > 1
    # fp4 codes use every nibble value, both nibbles
    b = s["layers.2.ffn.experts.3.w1.weight"].view(torch.uint8)
    assert (b & 15).unique().numel() == 16 and (b >> 4).unique().numel() == 16
    t = s["layers.0.ffn.gate.tid2eid"]
    assert t.min() >= 0 and t.max() < TINY.n_routed_experts and (t[:, 0] != t[:, 1]).all()
    # different seeds give different checkpoints; the same seed the same
    assert not torch.equal(s["embed.weight"], ck.random_state(TINY, seed=2)["embed.weight"])


@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("shard_indexer", [False, True])
def test_tp_shards_reassemble_the_full_tensors(g4_dir, world, shard_indexer):
    _, full = ck.load(g4_dir)
    ranks = [ck.load(g4_dir, rank=r, world=world, shard_indexer=shard_indexer)[1] for r in range(world)]
    specs = ck.param_specs(TP4_CFG)
    el = TP4_CFG.n_routed_experts // world
    for name, spec in specs.items():
        if spec.split == "expert":
            owners = [r for r in range(world) if name in ranks[r]]
            assert owners == [spec.expert // el], name
            continue
        dim = ck.shard_dim(spec, shard_indexer)
        parts = [bits(rk[name]) for rk in ranks]
        if dim is None:
            assert all(torch.equal(p, bits(full[name])) for p in parts), name
        else:
            assert all(p.shape[dim] == spec.shape[dim] // world for p in parts), name
            assert torch.equal(torch.cat(parts, dim), bits(full[name])), name
    # the splits the SPEC names
    assert ranks[1]["layers.0.attn.wq_b.weight"].shape[0] == TP4_CFG.n_heads * TP4_CFG.head_dim // world
    assert ranks[1]["layers.0.attn.wo_b.weight"].shape[1] == TP4_CFG.o_groups * TP4_CFG.o_lora_rank // world
    assert ranks[1]["embed.weight"].shape[0] == TP4_CFG.vocab_size // world
    idx = ranks[0]["layers.1.attn.indexer.weights_proj.weight"].shape[0]
    assert idx == (TP4_CFG.index_n_heads // world if shard_indexer else TP4_CFG.index_n_heads)


def test_tp_degree_must_divide(tiny_dir):
    with pytest.raises(ck.CheckpointError, match="o_groups=2 is not divisible by TP=4"):
        ck.load(tiny_dir, rank=0, world=4)
    with pytest.raises(ck.CheckpointError, match="rank 2 is outside"):
        ck.load(tiny_dir, rank=2, world=2)


def _rewrite_tensor(ckpt, name, value):
    index = json.loads((ckpt / ck.INDEX_FILE).read_text())
    fname = index["weight_map"][name]
    with safe_open(str(ckpt / fname), "pt") as f:
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    tensors[name] = value
    save_file(tensors, str(ckpt / fname))


def test_missing_tensor_is_named(tiny_dir, tmp_path):
    bad = copy_ckpt(tiny_dir, tmp_path / "bad")
    index = json.loads((bad / ck.INDEX_FILE).read_text())
    del index["weight_map"]["layers.3.attn.indexer.compressor.norm.weight"]
    (bad / ck.INDEX_FILE).write_text(json.dumps(index))
    with pytest.raises(ck.CheckpointError, match=r"layers\.3\.attn\.indexer\.compressor\.norm\.weight is missing"):
        ck.load(bad)


def test_wrong_shape_is_named(tiny_dir, tmp_path):
    bad = copy_ckpt(tiny_dir, tmp_path / "bad")
    _rewrite_tensor(bad, "layers.2.attn.wkv.scale", torch.ones(2, 2).to(torch.float8_e8m0fnu))
    with pytest.raises(ck.CheckpointError, match=r"layers\.2\.attn\.wkv\.scale .*shape \(2, 2\).*expects \(1, 2\)"):
        ck.load(bad)


def test_wrong_dtype_is_named(tiny_dir, tmp_path):
    bad = copy_ckpt(tiny_dir, tmp_path / "bad")
    _rewrite_tensor(bad, "layers.0.attn.attn_sink", torch.zeros(TINY.n_heads, dtype=torch.bfloat16))
    with pytest.raises(ck.CheckpointError, match=r"layers\.0\.attn\.attn_sink .*dtype BF16, expected F32"):
        ck.load(bad)


def test_truncated_shard_is_named(tiny_dir, tmp_path):
    bad = copy_ckpt(tiny_dir, tmp_path / "bad")
    index = json.loads((bad / ck.INDEX_FILE).read_text())
    fname = index["weight_map"]["head.weight"]
    data = (bad / fname).read_bytes()
    (bad / fname).write_bytes(data[: len(data) // 2])
    with pytest.raises(ck.CheckpointError, match=rf"tensor \S+: shard file {fname} is truncated or corrupt"):
        ck.load(bad)
    (bad / fname).write_bytes(b"\x00" * 64)
    with pytest.raises(ck.CheckpointError, match="truncated or corrupt"):
        ck.load(bad)


def test_missing_files_are_named(tiny_dir, tmp_path):
    bad = copy_ckpt(tiny_dir, tmp_path / "bad")
    index = json.loads((bad / ck.INDEX_FILE).read_text())
    fname = index["weight_map"]["norm.weight"]
    (bad / fname).unlink()
    with pytest.raises(ck.CheckpointError, match=rf"tensor \S+: its shard file {fname} .*does not exist"):
        ck.load(bad)
    (bad / ck.INDEX_FILE).unlink()
    with pytest.raises(ck.CheckpointError, match="has no model.safetensors.index.json"):
        ck.load(bad)
    (bad / ck.INDEX_FILE).write_text("{not json")
    with pytest.raises(ck.CheckpointError, match="not a valid safetensors index"):
        ck.load(bad)
    with pytest.raises(ck.CheckpointError, match="does not exist"):
        ck.load(tmp_path / "nowhere")
    (bad / "config.json").unlink()
    with pytest.raises(ck.CheckpointError, match="config.json"):
        ck.load(bad)


def test_cut_config_keeps_widths_and_the_mtp_layer(tmp_path):
    """make-checkpoint --layers/--experts/--vocab: Flash widths, fewer layers/experts/vocab entries, the
    layer kinds of the first N layers, the MTP layer kept; bad values are one-line usage errors."""
    from kernelbench.decoder.checkpoint import cut_config, make_random
    from kernelbench.usage import UsageProblem

    c = cut_config(FLASH, layers=4, experts=16, vocab=8192)
    assert (c.name, c.n_layers, c.n_routed_experts, c.vocab_size) == ("flash-l4-e16-v8192", 4, 16, 8192)
    assert c.compress_ratios == (0, 0, 4, 128, 0) and c.n_hash_layers == 3
    assert (c.dim, c.n_heads, c.head_dim, c.q_lora_rank, c.index_topk) == (4096, 64, 512, 1024, 512)
    assert cut_config(TINY) is TINY
    for bad in (dict(layers=0), dict(layers=44), dict(experts=5), dict(vocab=1)):
        with pytest.raises(UsageProblem):
            cut_config(FLASH, **bad)
    path = make_random(tmp_path / "ck", "tiny", layers=2, experts=4, vocab=256)
    cfg = ModelConfig.load(path)
    assert (cfg.name, cfg.n_layers, cfg.n_routed_experts, cfg.vocab_size) == ("tiny-l2-e4-v256", 2, 4, 256)
    assert cfg.compress_ratios == (0, 4, 0)
