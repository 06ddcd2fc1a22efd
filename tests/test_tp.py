"""The TP context and the multi-process launcher (gloo on CPU)."""
import pytest
import torch

from kernelbench.decoder.tp import LaunchError, TPContext, launch


def _collectives(ctx: TPContext, n: int):
    x = torch.full((3,), float(ctx.rank + 1))
    ctx.all_reduce(x)
    g = ctx.all_gather(torch.arange(n) + 10 * ctx.rank, dim=0)
    return ctx.rank, ctx.world, x, g


def _fails_on_rank_1(ctx: TPContext):
    if ctx.rank == 1:
        raise RuntimeError("boom on purpose")
    return ctx.rank


def test_world_1_collectives_are_identity():
    ctx = TPContext()
    x = torch.randn(4)
    assert ctx.all_reduce(x.clone()).equal(x) and ctx.all_gather(x).equal(x)
    assert ctx.part(12) == 12 and ctx.start(12) == 0 and not ctx.active


def test_shares_and_errors():
    ctx = TPContext(rank=2, world=4)
    assert ctx.part(16) == 4 and ctx.start(16) == 8
    with pytest.raises(ValueError, match="n_heads=6 is not divisible by TP=4"):
        ctx.part(6, "n_heads")
    with pytest.raises(ValueError, match="bad TP layout"):
        TPContext(rank=4, world=4)
    sim = TPContext(rank=0, world=8, simulate=True)
    y = torch.ones(2)
    assert sim.all_reduce(y).equal(torch.ones(2)) and not sim.active and sim.part(64) == 8


def test_launch_runs_real_collectives():
    out = launch(_collectives, world=3, args=(2,))
    assert [o[0] for o in out] == [0, 1, 2] and all(o[1] == 3 for o in out)
    for _, _, x, g in out:
        assert torch.equal(x, torch.full((3,), 6.0))                      # 1 + 2 + 3
        assert torch.equal(g, torch.tensor([0, 1, 10, 11, 20, 21]))      # rank order


def test_launch_reports_the_failing_rank():
    with pytest.raises(LaunchError, match=r"rank 1:[\s\S]*boom on purpose"):
        launch(_fails_on_rank_1, world=2)
    assert launch(_fails_on_rank_1, world=1) == [0]
