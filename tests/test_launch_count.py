"""kernelbench.decoder.launch_count: launches per op of one decode step on the CPU (Triton launches recorded, not run;
torch ops seen by a dispatch mode), and the launch budget of the fused attention front it guards."""
import os

import pytest
import torch

from kernelbench.decoder import launch_count as lc
from kernelbench.decoder.backend import Ops


def test_counts_each_launch_under_its_op_and_the_fused_front_saves_launches():
    model, ids, pos, seq, cache = lc.build("tiny", "swa,csa,hca", tp=1, batch=1, context=20)
    n = model.cfg.n_layers
    c = lc.count_step(model, ids, pos, seq, cache)
    assert c.calls["attention_front"] == n and c.calls["attention_q"] == n
    # C=1: the activation is quantized inside each GEMM and split K is summed in the kernel: one launch per call
    for op in ("attention_front", "attention_q"):
        assert c.triton[op] == c.calls[op] == n, (op, c.triton[op], c.calls[op])
    # the swa and hca lists once per kind; the csa layer's from its top-k (csa_indices), no attention_indices after it
    assert c.triton["attention_indices"] == c.calls["attention_indices"] == 2 and c.calls["indexer_topk"] == 0
    assert c.calls["csa_indices"] and c.triton["csa_indices"] == 2 * c.calls["csa_indices"]   # two launches
    # the attention and wo_a as one op: by default its parts (split + combine, then the wo_a GEMV: three launches);
    # JOIN (wo_a's GEMV joins the split partials) two
    assert c.calls["sparse_attention"] == c.calls["grouped_wo_a"] == 0
    assert c.calls["sparse_attention_wo_a"] == n and c.triton["sparse_attention_wo_a"] == 3 * n
    from kernelbench import tuned_configs
    from kernelbench.decoder.trials import parse_trial
    with tuned_configs.pins_applied(parse_trial('sparse_attention_wo_a={"JOIN": true}').pins):
        j = lc.count_step(model, ids, pos, seq, model.new_cache(1, 28))
    assert j.triton["sparse_attention_wo_a"] == 2 * n and sum(j.triton.values()) == sum(c.triton.values()) - n
    parts = Ops("triton", {"csa_indices": "triton_parts"})              # indexer_topk, then attention_indices
    model.env.ops = parts
    q = lc.count_step(model, ids, pos, seq, model.new_cache(1, 28))
    assert q.triton["csa_indices"] == 3 * c.calls["csa_indices"]
    assert c.calls["kv_write"] == 0 and c.calls["head_rms_norm_rope"] == 0
    assert c.total() == sum(tr + to for _, _, tr, to, _ in c.rows())
    assert sum(c.syncs.values()) == 0 or set(c.syncs) <= {"compressor_step"}, dict(c.syncs)
    # the separate kernels: wq_a, wkv, q_norm, kv_write (4) and wq_b, head norm (2) per layer
    model.env.ops = Ops("triton", {"attention_front": "triton_parts", "attention_q": "triton_parts"})
    p = lc.count_step(model, ids, pos, seq, model.new_cache(1, 28))
    assert p.triton["attention_front"] == 4 * n and p.triton["attention_q"] == 2 * n
    assert sum(p.triton.values()) - sum(c.triton.values()) == 4 * n     # (kv_write's CPU-only checks add torch ops)


def test_torch_glue_outside_ops_is_counted_and_views_are_free():
    counts, current = lc.Counts(), [lc.OUTSIDE]
    x = torch.randn(4, 8)
    with lc._TorchOps(counts, current):
        y = x.view(2, 16).t()            # views: no launch
        z = y.contiguous() + 1           # a copy and an add
        torch.empty(3)                   # allocation only
        torch.zeros(3)                   # a fill
    assert counts.launches(lc.OUTSIDE) == 3, counts.torch_ops
    assert z.shape == (16, 2)


def test_tp_sublayer_output_goes_to_the_mhc_kernel_without_a_cast_launch(monkeypatch):
    # TP rank-0 shapes: the MoE's fp32 all-reduced sum (and, C > 1 with the side lane, the shared expert's bf16
    # output) is rounded inside mhc_post_pre_norm; an mHC implementation without x_add gets one cast / add launch
    # per layer outside the ops (the decoder's former `.to(bf16)` / `torch.add`)
    for batch in (1, 4):
        model, ids, pos, seq, cache = lc.build("tiny", "swa,csa", tp=2, batch=batch, context=20)
        n = model.cfg.n_layers
        fused = lc.count_step(model, ids, pos, seq, cache)
        plain = model.env.ops
        monkeypatch.setattr(plain, "accepts", lambda op, name: name != "x_add" and type(plain).accepts(plain, op, name))
        unfused = lc.count_step(model, ids, pos, seq, model.new_cache(batch, 28))
        monkeypatch.undo()
        assert unfused.launches(lc.OUTSIDE) - fused.launches(lc.OUTSIDE) == n, (batch, fused.torch_ops,
                                                                                 unfused.torch_ops)
        assert fused.calls["mhc_post_pre_norm"] == unfused.calls["mhc_post_pre_norm"] == 2 * n - 1


def test_a_cast_under_inference_mode_is_a_launch_and_a_same_dtype_to_is_not():
    counts, current = lc.Counts(), [lc.OUTSIDE]
    with torch.inference_mode():
        x = torch.randn(4, 8)
        with lc._TorchOps(counts, current):
            x.to(torch.bfloat16)         # aten.to.dtype here, not _to_copy: a copy
            x.to(torch.float32)          # returns x itself: nothing
    assert counts.launches(lc.OUTSIDE) == 1, counts.torch_ops


def test_ops_fuses_the_attention_output_unless_a_part_is_chosen():
    """The decode step calls sparse_attention_wo_a when its backend has it and neither part is overridden (a --use
    of a part must run), or when it is chosen itself; a backend without it keeps the parts."""
    parts = ("sparse_attention", "grouped_wo_a")
    assert Ops("triton").fuses("sparse_attention_wo_a", parts)
    assert Ops("reference").fuses("sparse_attention_wo_a", parts)
    assert not Ops("triton", {"sparse_attention": "triton_fused"}).fuses("sparse_attention_wo_a", parts)
    assert not Ops("triton", {"grouped_wo_a": "triton_v1"}).fuses("sparse_attention_wo_a", parts)
    assert Ops("triton", {"grouped_wo_a": "triton_v1", "sparse_attention_wo_a": "triton_parts"}).fuses(
        "sparse_attention_wo_a", parts)
    assert not Ops("triton_v1").fuses("sparse_attention_wo_a", parts)      # no impl of that name: the parts


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="runs the Triton step: TRITON_INTERPRET=1")
def test_decode_step_with_the_join_equals_the_two_ops():
    """The whole decode step (TINY's swa, csa, hca layers, two ragged sequences, Triton kernels in the interpreter)
    with sparse_attention_wo_a's JOIN pinned equals the default step (the two ops' kernels) bit for bit: logits,
    streams and every cache tensor."""
    from kernelbench import tuned_configs
    from kernelbench.decoder import decode_bench as db
    from kernelbench.decoder.tp import TPContext
    from kernelbench.decoder.trials import parse_trial
    model = db.random_model(TPContext(), db.bench_config("tiny", "swa,csa,hca"), "triton", torch.device("cpu"))
    ids, pos, seq = torch.tensor([3, 5]), torch.tensor([37, 20]), torch.tensor([1, 0])

    def step():
        cache = model.new_cache(2, 48)
        cache.fill_random(torch.Generator().manual_seed(3))
        logits, h = model.decode(ids, pos, seq, cache, check=False)
        return [logits, h] + [t for lc in cache.layers for t in lc.tensors()]
    plain = step()
    with tuned_configs.pins_applied(parse_trial('sparse_attention_wo_a={"JOIN": true}').pins):
        joined = step()
    assert len(plain) == len(joined) > 2
    assert all(torch.equal(a, b) for a, b in zip(plain, joined))
