"""The shared expert split over the TP ranks (kernelbench/decoder/model.py shared_split): each rank keeps its
1/TP slice of the replicated shared expert's inner dimension and runs it with its routed experts (moe_routed's
shared inputs), so the all-reduce of the routed experts also sums the shared expert. The whole-model TP4 check against TP1 with real
collectives is tests/test_model.py::test_tensor_parallel_2_and_4_match_tp1 (its config has F = 512 = 128 * 4)."""
import pytest
import torch

from kernelbench import registry
from kernelbench.config import TINY
from kernelbench.decoder import checkpoint as ck
from kernelbench.decoder.backend import Ops
from kernelbench.decoder.model import SHARED_SPLIT_ENV, Transformer, shared_split
from kernelbench.decoder.tp import TPContext
from kernelbench.reference import moe as R

CFG = TINY.replace(name="tiny-f256", moe_inter_dim=256)      # two whole 128-blocks of F: TP 2 can split it


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    return ck.write_random(tmp_path_factory.mktemp("m") / "f256", CFG, seed=3)


def test_split_needs_tp_whole_scale_blocks_and_an_impl_that_takes_the_shared_weights(monkeypatch):
    registry.load_builtin()
    ops = Ops("reference")
    two = TPContext(rank=1, world=2, simulate=True)
    monkeypatch.delenv(SHARED_SPLIT_ENV, raising=False)
    assert shared_split(CFG, two, ops)                                       # the default
    assert not shared_split(CFG, TPContext(), ops)                           # TP 1: nothing to split
    assert not shared_split(TINY, two, ops)                                  # F = 128: half a scale block each
    assert not shared_split(CFG, TPContext(rank=0, world=4, simulate=True), ops)
    assert not shared_split(CFG, two, ops, want=False)
    monkeypatch.setenv(SHARED_SPLIT_ENV, "0")
    assert not shared_split(CFG, two, ops)
    monkeypatch.setenv(SHARED_SPLIT_ENV, "yes")
    with pytest.raises(ValueError, match=SHARED_SPLIT_ENV):
        shared_split(CFG, two, ops)


@pytest.mark.parametrize("rank", [0, 1])
def test_each_rank_keeps_its_slice_of_the_shared_expert(ckpt, rank, monkeypatch):
    monkeypatch.delenv(SHARED_SPLIT_ENV, raising=False)
    _, sd = ck.load(ckpt, rank=0, world=1)
    model = Transformer.from_checkpoint(ckpt, tp=TPContext(rank=rank, world=2, simulate=True))
    assert model.env.shared_split
    layer = 2
    moe = model.layers[layer].ffn
    p = f"layers.{layer}.ffn.shared_experts"
    rows, blocks = slice(128 * rank, 128 * rank + 128), slice(rank, rank + 1)
    assert torch.equal(moe.shared_part_w1.view(torch.uint8), sd[f"{p}.w1.weight"][rows].view(torch.uint8))
    assert torch.equal(moe.shared_part_w3.view(torch.uint8), sd[f"{p}.w3.weight"][rows].view(torch.uint8))
    assert torch.equal(moe.shared_part_w2.view(torch.uint8), sd[f"{p}.w2.weight"][:, rows].view(torch.uint8))
    assert moe.shared_part_w2.is_contiguous() and moe.shared_part_w2_scale.is_contiguous()
    assert torch.equal(moe.shared_part_w1_scale.view(torch.uint8), sd[f"{p}.w1.scale"][blocks].view(torch.uint8))
    assert torch.equal(moe.shared_part_w2_scale.view(torch.uint8), sd[f"{p}.w2.scale"][:, blocks].view(torch.uint8))
    assert not hasattr(moe, "shared_w1")          # no step runs the whole expert: it is not kept
    monkeypatch.setenv(SHARED_SPLIT_ENV, "0")
    whole = Transformer.from_checkpoint(ckpt, tp=TPContext(rank=rank, world=2, simulate=True))
    assert not whole.env.shared_split and not hasattr(whole.layers[layer].ffn, "shared_part_w1")
    assert whole.layers[layer].ffn.shared_w1.shape == (256, CFG.dim)


class _RoutedLog:
    """Ops that record the shared expert's W1 rows each moe_routed call gets (None: no shared weights)."""

    def __init__(self, ops):
        self.ops, self.rows = ops, []

    def __getattr__(self, name):
        fn = getattr(self.ops, name)
        if name != "moe_routed":
            return fn

        def call(**k):
            self.rows.append(k["shared_w1"].shape[0] if "shared_w1" in k else None)
            return fn(**k)
        return call


def test_every_step_passes_the_slice_to_moe_routed(ckpt, monkeypatch):
    """Split, every step passes this rank's slice to moe_routed, with the shared_expert overlap site on or off and at
    any token count (the op runs it inside its launches below SHARED_SIDE_MIN_T tokens, beside them from there:
    tests/test_moe.py); split off, the whole expert as before (beside on the side lane from 16 tokens with the
    site, else inside rank 0's launches)."""
    for split, overlap, rows in (("1", False, [128] * 3), ("1", True, [128] * 3), ("0", False, [256] * 3),
                                 ("0", True, [256, 256, None])):
        monkeypatch.setenv(SHARED_SPLIT_ENV, split)
        model = Transformer.from_checkpoint(ckpt, tp=TPContext(rank=0, world=2, simulate=True), overlap=overlap)
        log = _RoutedLog(model.env.ops)
        model.env.ops = log
        gen = torch.Generator().manual_seed(0)
        for t in (1, 15, 16):
            x = torch.randn(t, CFG.dim, generator=gen).to(torch.bfloat16)
            y, _ = model.layers[2].ffn(model.env, x, torch.randint(0, CFG.vocab_size, (t,), generator=gen))
            assert y.shape == (t, CFG.dim) and torch.isfinite(y).all()
        assert log.rows == rows, (split, overlap, log.rows)


def test_the_slices_sum_to_the_shared_expert(ckpt):
    """Sum over the ranks of each slice's bf16 output = the whole shared expert, to bf16 rounding of the parts (the
    SwiGLU is elementwise over F and each slice holds whole 128 x 128 scale blocks)."""
    _, sd = ck.load(ckpt, rank=0, world=1)
    p = "layers.2.ffn.shared_experts"
    w = {n: sd[f"{p}.{n}.weight"] for n in ("w1", "w2", "w3")}
    s = {n: sd[f"{p}.{n}.scale"] for n in ("w1", "w2", "w3")}
    x = (torch.randn(4, CFG.dim, generator=torch.Generator().manual_seed(0)) * 4).to(torch.bfloat16)
    whole = R.shared_expert(x, w["w1"], s["w1"], w["w3"], s["w3"], w["w2"], s["w2"], CFG.swiglu_limit).float()
    parts = sum(R.shared_expert(x, w["w1"][r * 128:(r + 1) * 128], s["w1"][r:r + 1], w["w3"][r * 128:(r + 1) * 128],
                                s["w3"][r:r + 1], w["w2"][:, r * 128:(r + 1) * 128].contiguous(),
                                s["w2"][:, r:r + 1].contiguous(), CFG.swiglu_limit).float() for r in range(2))
    err = (parts - whole).norm() / whole.norm()
    assert 0 < err < 2 ** -7, err          # not bit-equal (two bf16 roundings), far below a wrong slice (~1)
