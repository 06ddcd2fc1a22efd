"""The decode step's two lanes (kernelbench.decoder.lanes, kernels/common.py `lane`): concurrent kernels never share
scratch, the attention layers put exactly the compressor / indexer work on the side, the attribution of a step with
kernels side by side still adds up, and (GPU) the side stream changes no output bit, eager or CUDA-graph replayed."""
from __future__ import annotations

import contextlib

import pytest
import torch

from kernelbench.decoder import checkpoint
from kernelbench.decoder import decode_bench as db
from kernelbench.decoder.backend import Ops
from kernelbench.decoder.lanes import (KV_FORK_ENV, KV_LANE, KV_LANE_ENV, KV_LANE_MAX_T, SIDE_LANE, SITES, Lanes,
                                       parse_sites)
from kernelbench.decoder.model import Transformer
from kernelbench.decoder.tp import TPContext
from kernelbench.kernels import linear as KL
from kernelbench.kernels import mhc as KM
from kernelbench.kernels import common as KC
from kernelbench.kernels.common import current_lane, lane

CPU = torch.device("cpu")


def test_each_lane_has_its_own_tickets_and_counters():
    main_t, main_c = KL.split_tickets(CPU, 8), KM.token_counters(CPU, 8)
    with lane(1):
        side_t, side_c = KL.split_tickets(CPU, 8), KM.token_counters(CPU, 8)
        assert current_lane() == 1
        with lane(2):
            assert current_lane() == 2 and KL.split_tickets(CPU, 8).data_ptr() not in (main_t.data_ptr(),
                                                                                       side_t.data_ptr())
        assert current_lane() == 1 and KL.split_tickets(CPU, 8) is side_t
    assert current_lane() == 0
    assert side_t.data_ptr() != main_t.data_ptr() and side_c.data_ptr() != main_c.data_ptr()
    assert KL.split_tickets(CPU, 8) is main_t and KM.token_counters(CPU, 8) is main_c
    assert int(side_t.abs().sum()) == 0 and int(side_c.abs().sum()) == 0
    grown = KL.split_tickets(CPU, main_t.numel() + 1)          # a launch that needs more regrows its lane only
    assert grown.numel() > main_t.numel()
    with lane(1):
        assert KL.split_tickets(CPU, 8) is side_t


@pytest.mark.parametrize("bad", [-1, 1.0, "1"])
def test_lane_refuses_what_is_not_a_lane(bad):
    with pytest.raises(ValueError, match="lane must be an int"):
        with lane(bad):
            pass


def test_lanes_without_a_gpu_keep_the_side_lane_in_program_order():
    lanes = Lanes(CPU)
    assert not lanes.streams and lanes.sites == frozenset(SITES)   # no streams on a CPU, the structure kept
    for site in SITES:
        with lanes.side(site):
            assert current_lane() == SIDE_LANE
        assert current_lane() == 0
    lanes.join()                                                    # nothing to wait for
    off = Lanes(CPU, "none")
    with off.side("attention"):
        assert current_lane() == 0                                  # a site that is off: main lane, as written
    with pytest.raises(ValueError, match="unknown overlap site"):
        with off.side("mlp"):
            pass


@pytest.mark.parametrize("text, sites", [(True, set(SITES)), ("all", set(SITES)), (False, set()), ("none", set()),
                                         ("attention", {"attention"}), (" shared_expert, ", {"shared_expert"}),
                                         (["attention", "shared_expert"], set(SITES))])
def test_parse_sites(text, sites):
    assert parse_sites(text) == sites


def test_parse_sites_names_what_is_unknown():
    with pytest.raises(ValueError, match="'mlp'.*attention, shared_expert or none"):
        parse_sites("attention,mlp")


class _LaneLog:
    """Ops that record (op, lane) of every call, then run the wrapped ops."""

    def __init__(self, ops):
        self._ops, self.calls, self.kwargs = ops, [], {}

    def __getattr__(self, name):
        fn = getattr(self._ops, name)
        if not callable(fn) or name.startswith("_") or name in ("accepts", "prepare"):
            return fn

        def call(*a, **k):
            self.calls.append((name, current_lane()))
            self.kwargs.setdefault(name, []).append(set(k))
            return fn(*a, **k)
        return call


def _logged_step(overlap, tp: TPContext, shared_expert_min_t: int = 1, kv_lane=False, kv_fork="front"):
    """One decode step of 3 tokens of the tiny model over swa, csa and hca layers (reference ops) with the lanes
    `overlap` (and `kv_lane`: Lanes' argument; None reads KERNELBENCH_KV_LANE) -> ((op, lane) of every call, logits,
    streams, each op's calls' keyword names)."""
    cfg = db.bench_config("tiny", "swa,csa,hca")
    sd = checkpoint.random_local_state(cfg, tp.rank, tp.world, seed=3, device=CPU)
    model = Transformer(cfg, sd, Ops("reference"), tp, CPU, overlap)
    model.env.lanes = Lanes(CPU, overlap, shared_expert_min_t=shared_expert_min_t, kv_lane=kv_lane, kv_fork=kv_fork)
    log = _LaneLog(model.env.ops)
    model.env.ops = log
    cache = model.new_cache(3, 64)
    cache.fill_random(torch.Generator().manual_seed(1))
    with torch.inference_mode():
        logits, h = model.decode(torch.tensor([5, 9, 11]), torch.tensor([17, 30, 41]), torch.arange(3), cache,
                                 check=False)
    return log.calls, logits, h, log.kwargs


def test_decode_puts_compressor_and_indexer_work_on_the_side_lane():
    """The attention site: the compressor steps, the indexer's head weights and its top-k writing the csa index lists
    (csa_indices) run on the side lane, everything else of the attention on the main lane, the compressor steps before their layer's
    attention front (the side forks there)."""
    calls, logits, h, _ = _logged_step(True, TPContext())
    side = {name for name, ln in calls if ln == SIDE_LANE}
    main = {name for name, ln in calls if ln == 0}
    assert side == {"compressor_step", "bf16_linear", "csa_indices"}
    assert {"attention_front", "attention_q", "indexer_q", "sparse_attention_wo_a", "mhc_post_pre_norm",
            "moe_layer"} <= main
    assert "compressor_step" not in main and "csa_indices" not in main and "indexer_topk" not in main
    # the csa layer's index lists on the side (from its top-k), the swa / hca layers' on the main lane
    assert [ln for name, ln in calls if name == "attention_indices"] == [0, 0]
    assert [ln for name, ln in calls if name == "csa_indices"] == [SIDE_LANE]
    # compressor steps: csa (main compressor, indexer's compressor) and hca, all before their layer's front
    assert [ln for name, ln in calls if name == "compressor_step"] == [SIDE_LANE] * 3
    order = [name for name, _ in calls]
    fronts = [i for i, n in enumerate(order) if n == "attention_front"]
    comps = [i for i, n in enumerate(order) if n == "compressor_step"]
    assert comps[0] < fronts[1] and comps[2] < fronts[2] and comps[2] > fronts[1]
    assert torch.isfinite(logits).all() and torch.isfinite(h.float()).all()


def test_kv_lane_puts_the_kv_compressor_on_a_lane_of_its_own(monkeypatch):
    """With the KV lane the attention layers' KV compressor step runs on KV_LANE and the indexer's work (its
    compressor, head weights, top-k, the csa index lists) stays on the side lane; the logits and streams are those of
    the lanes without it bit for bit (the same ops on the same inputs). KERNELBENCH_KV_LANE: "0" never, "1" always,
    "auto" (the default) up to KV_LANE_MAX_T tokens, so the 3-token step takes it and a limit below 3 does not; a bad
    value is refused; without the attention site there is no KV lane."""
    monkeypatch.setenv(KV_LANE_ENV, "0")
    calls, logits, h, _ = _logged_step(True, TPContext(), kv_lane=None)
    monkeypatch.setenv(KV_LANE_ENV, "1")
    kv_calls, kv_logits, kv_h, _ = _logged_step(True, TPContext(), kv_lane=None)
    assert sorted(calls) == sorted((n, SIDE_LANE if ln == KV_LANE else ln) for n, ln in kv_calls)
    # tiny swa, csa, hca: the csa layer's KV and index compressors, then the hca layer's KV compressor
    assert [ln for n, ln in calls if n == "compressor_step"] == [SIDE_LANE] * 3
    assert [ln for n, ln in kv_calls if n == "compressor_step"] == [KV_LANE, SIDE_LANE, KV_LANE]
    assert {n for n, ln in kv_calls if ln == KV_LANE} == {"compressor_step"}
    assert {n for n, ln in kv_calls if ln == SIDE_LANE} == {"compressor_step", "bf16_linear", "csa_indices"}
    assert torch.equal(logits, kv_logits) and torch.equal(h, kv_h)
    monkeypatch.delenv(KV_LANE_ENV)
    assert 3 <= KV_LANE_MAX_T, "the premise: the 3-token step is within the default's limit"
    auto_calls, auto_logits, _, _ = _logged_step(True, TPContext(), kv_lane=None)
    assert auto_calls == kv_calls and torch.equal(auto_logits, logits)
    assert _logged_step(True, TPContext(), kv_lane=2)[0] == calls          # a limit of 2 tokens: not at 3
    assert Lanes(CPU).kv_lane == f"up to {KV_LANE_MAX_T} tokens" and Lanes(CPU, kv_lane=True).kv_lane == "on"
    assert Lanes(CPU, "shared_expert").kv_lane == "off" and Lanes(CPU, kv_lane=False).kv_lane == "off"
    monkeypatch.setenv(KV_LANE_ENV, "2")
    with pytest.raises(ValueError, match=KV_LANE_ENV):
        Lanes(CPU)
    monkeypatch.setenv(KV_LANE_ENV, "0")
    assert Lanes(CPU).kv_lane == "off"


def test_kv_lane_forked_after_the_front_changes_the_order_not_the_bits(monkeypatch):
    """KERNELBENCH_KV_LANE_FORK "after": each layer's KV compressor step (on KV_LANE) is queued after its attention
    front instead of before it; the index compressor stays before the front; logits and streams are bit-equal to the
    fork beside the front. Without the KV lane the setting changes nothing; a bad value is refused; the label says it."""
    calls, logits, h, _ = _logged_step(True, TPContext(), kv_lane=True)
    late, late_logits, late_h, _ = _logged_step(True, TPContext(), kv_lane=True, kv_fork="after")
    assert sorted(calls) == sorted(late) and torch.equal(logits, late_logits) and torch.equal(h, late_h)
    fronts = [i for i, (n, _) in enumerate(late) if n == "attention_front"]
    kv = [i for i, (n, ln) in enumerate(late) if n == "compressor_step" and ln == KV_LANE]
    index = [i for i, (n, ln) in enumerate(late) if n == "compressor_step" and ln == SIDE_LANE]
    assert len(kv) == 2 and kv[0] == fronts[1] + 1 and kv[1] == fronts[2] + 1    # csa, hca: right after the front
    assert index[0] < fronts[1]                                                   # the indexer's: before it
    before = [i for i, (n, ln) in enumerate(calls) if n == "compressor_step" and ln == KV_LANE]
    assert before[0] < [i for i, (n, _) in enumerate(calls) if n == "attention_front"][1]
    assert _logged_step(True, TPContext(), kv_lane=False, kv_fork="after")[0] == \
        _logged_step(True, TPContext(), kv_lane=False)[0]
    assert Lanes(CPU, kv_lane=True, kv_fork="after").kv_lane == "on, after the front"
    assert Lanes(CPU, kv_lane=False, kv_fork="after").kv_lane == "off"
    monkeypatch.setenv(KV_FORK_ENV, "later")
    with pytest.raises(ValueError, match=KV_FORK_ENV):
        Lanes(CPU)
    monkeypatch.setenv(KV_FORK_ENV, "after")
    assert Lanes(CPU, kv_lane=True).kv_fork == "after"


def test_shared_expert_site_runs_it_beside_the_routed_experts():
    """TP > 1 (simulated): the MoE is moe_routed; with the shared_expert site the shared expert is its own op on the
    side lane and rank 0's moe_routed gets no shared weights; without any site, moe_routed carries them (the fused
    form) and nothing runs on the side lane. The logits agree to the fp32 summation order (reference ops)."""
    tp = TPContext(rank=0, world=2, simulate=True)
    calls, logits, _, kwargs = _logged_step(True, tp)
    assert [ln for name, ln in calls if name == "shared_expert"] == [SIDE_LANE] * 3
    assert kwargs["moe_routed"] and all("shared_w1" not in k for k in kwargs["moe_routed"])
    assert "moe_gate" not in kwargs and "moe_experts" not in kwargs
    calls0, logits0, _, kwargs0 = _logged_step("none", tp)
    assert "shared_expert" not in {n for n, _ in calls0} and {ln for _, ln in calls0} == {0}
    assert kwargs0["moe_routed"] and all("shared_w1" in k for k in kwargs0["moe_routed"])
    # below SHARED_EXPERT_MIN_T tokens (the default: 16) the site keeps the fused form
    calls16, logits16, _, kwargs16 = _logged_step(True, tp, shared_expert_min_t=16)
    assert "shared_expert" not in {n for n, _ in calls16}
    assert all("shared_w1" in k for k in kwargs16["moe_routed"]) and torch.equal(logits16, logits0)
    torch.testing.assert_close(logits, logits0, rtol=2e-2, atol=2e-2)
    assert not torch.equal(logits, torch.zeros_like(logits))


def test_attribution_reports_kernels_side_by_side():
    """Kernels with GPU start times: the union of their spans is the busy time; what the op rows count twice is the
    OVERLAP row, and op rows - OVERLAP + IDLE = the step."""
    ranges = [db.Range("attention_front", 0, 10), db.Range("compressor_step", 10, 20)]
    ks = [db.Kernel("a", 4000, 5, start=1000), db.Kernel("c", 3000, 15, start=2000),     # 2000..5000 side by side
          db.Kernel("a2", 1000, 6, start=6000)]
    rows = db.attribute(ranges, ks, 1, step_ms=0.010)
    by = {r.op: r.gpu_ms for r in rows}
    assert by["attention_front"] == pytest.approx(0.005) and by["compressor_step"] == pytest.approx(0.003)
    assert db.covered_ns(ks) == 5000
    assert by[db.OVERLAP] == pytest.approx(0.003) and by[db.IDLE] == pytest.approx(0.005)
    dicts = [r.as_json() for r in rows]
    assert db.op_rows_busy(dicts) == pytest.approx(0.005)
    # no start times (host-timed or synthetic records): no OVERLAP row, idle from the plain sum
    plain = db.attribute(ranges, [db.Kernel("a", 4000, 5), db.Kernel("c", 3000, 15)], 1, step_ms=0.010)
    assert [r.op for r in plain][-1] == db.IDLE and db.OVERLAP not in {r.op for r in plain}


def test_covered_ns_is_the_union_of_spans():
    ks = [db.Kernel("x", 10, None, start=100), db.Kernel("y", 10, None, start=105),
          db.Kernel("z", 2, None, start=107), db.Kernel("w", 5, None, start=200)]
    assert db.covered_ns(ks) == 15 + 5
    assert db.covered_ns([]) == 0


# ---- on the GPU ------------------------------------------------------------------------------------------------
def _step_outputs(model, c: int, graph: bool) -> list[torch.Tensor]:
    """One decode step of C sequences at context ~512 on a fresh random cache -> logits, streams and every cache
    tensor after it (eager, or replayed from a CUDA graph captured after a warm-up on the same fresh cache)."""
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(7 + c)
    ids = torch.randint(0, model.cfg.vocab_size // 8, (c,), generator=gen).to(dev)
    pos = torch.randint(400, 600, (c,), generator=gen).to(dev)
    seq = torch.arange(c, device=dev)
    cache = model.new_cache(c, 640)

    def fresh():
        cache.fill_random(torch.Generator(device=dev).manual_seed(11))

    with torch.inference_mode():
        fresh()
        if not graph:
            out = model.decode(ids, pos, seq, cache, check=False)
        else:
            s = torch.cuda.Stream(dev)
            s.wait_stream(torch.cuda.current_stream(dev))
            with torch.cuda.stream(s):
                model.decode(ids, pos, seq, cache, check=False)
            torch.cuda.current_stream(dev).wait_stream(s)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = model.decode(ids, pos, seq, cache, check=False)
            fresh()
            g.replay()
        torch.cuda.synchronize(dev)
    return [out[0].clone(), out[1].clone()] + [t.clone() for lc in cache.layers for t in lc.tensors()]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; runs on the device machine "
                    "(scripts/device_gpu_tests.sh rest)")
@pytest.mark.parametrize("c", [1, 16, 64])
def test_gpu_side_stream_changes_no_bit(c):
    """Flash TP8 rank-0 widths, layers swa, csa, hca, csa, Triton kernels, every site (the shared expert's at every
    C): the step with the side stream (eager and graph-replayed) equals the same structure on one stream bit for bit
    (logits, streams and every cache tensor); and the attention site alone changes no bit against no site at all
    (its kernels and inputs are those of the one-stream step). (The shared_expert site adds the shared expert after
    the routed sum instead of inside it: at C = 1 another rounding, which random weights amplify through four
    layers' gates, so it is compared in the op's and the reference model's tests, not here.) The KV lane
    (kv_lane=True: the KV compressor on a third stream), forked beside the front or after it, changes no bit
    either."""
    dev = torch.device("cuda")
    cfg = db.bench_config("flash", "swa,csa,hca,csa")
    model = db.random_model(TPContext(rank=0, world=8, simulate=True), cfg, "triton", dev, seed=0, overlap="none")
    none = _step_outputs(model, c, graph=False)
    model.env.lanes = Lanes(dev, "attention")
    assert model.env.lanes.streams
    attention = _step_outputs(model, c, graph=True)
    model.env.lanes = Lanes(dev, "all", streams=False, shared_expert_min_t=1)
    one = _step_outputs(model, c, graph=False)
    model.env.lanes = Lanes(dev, "all", shared_expert_min_t=1, kv_lane=False)
    two, two_graph = _step_outputs(model, c, graph=False), _step_outputs(model, c, graph=True)
    model.env.lanes = Lanes(dev, "all", shared_expert_min_t=1, kv_lane=True)     # + the KV compressor's own lane
    three = _step_outputs(model, c, graph=True)
    model.env.lanes = Lanes(dev, "all", shared_expert_min_t=1, kv_lane=True, kv_fork="after")   # forked after the front
    late = _step_outputs(model, c, graph=True)
    for a, b in zip(none, attention):
        assert torch.equal(a, b)
    for a, b, g, k, k2 in zip(one, two, two_graph, three, late):
        assert torch.equal(a, b) and torch.equal(a, g) and torch.equal(a, k) and torch.equal(a, k2)
    assert torch.isfinite(one[0]).all()
    # (against no site, the shared expert's site gave the same bits at C = 16 and 64 on the H200, session 10 call 3:
    # the routed launches' combine adds the bf16 shared output to the fp32 routed sum as the decoder's add does;
    # at C = 1 the finishing epilogue's order differs)


@pytest.mark.parametrize("text, kinds", [(None, {"main", "lane", "kv"}), ("off", set()), ("main", {"main"}),
                                         (" main , op ", {"main", "op"}), ("main,lane,op", {"main", "lane", "op"}),
                                         ("main,lane", {"main", "lane"}), ("main:16,kv", {"main", "kv"})])
def test_stream_priority_kinds_from_the_environment(monkeypatch, text, kinds):
    if text is None:
        monkeypatch.delenv(KC.PRIORITY_ENV, raising=False)
    else:
        monkeypatch.setenv(KC.PRIORITY_ENV, text)
    assert KC.high_priority_kinds() == kinds


@pytest.mark.parametrize("text, at, label", [
    (None, {1: {"lane", "kv"}, 2: {"main", "lane", "kv"}, 64: {"main", "lane", "kv"}}, "main:2,lane,kv"),
    ("main:16,lane", {1: {"lane"}, 15: {"lane"}, 16: {"main", "lane"}}, "main:16,lane"),
    ("main:1,kv", {1: {"main", "kv"}, 64: {"main", "kv"}}, "main,kv"),
    ("main,lane,kv", {1: {"main", "lane", "kv"}}, "main,lane,kv"),
])
def test_the_main_chain_is_raised_from_its_token_count(monkeypatch, text, at, label):
    # session 46: by default the capture stream runs below the side lanes at one token and above them from two
    if text is None:
        monkeypatch.delenv(KC.PRIORITY_ENV, raising=False)
    else:
        monkeypatch.setenv(KC.PRIORITY_ENV, text)
    for tokens, kinds in at.items():
        assert KC.high_priority_kinds(tokens) == kinds, tokens
    assert KC.priority_label() == label


@pytest.mark.parametrize("text, words", [("lane:2", "only main takes a token count"),
                                         ("main:0", "whole number >= 1"), ("main:two", "whole number >= 1"),
                                         ("main:2,attention", "unknown stream kind 'attention'")])
def test_a_bad_token_count_is_refused_by_name(monkeypatch, text, words):
    monkeypatch.setenv(KC.PRIORITY_ENV, text)
    with pytest.raises(ValueError, match=words):
        KC.high_priority_kinds(1)


def test_each_graph_is_captured_at_its_batch_priority(monkeypatch):
    # decode-bench makes the capture stream per point, at that point's token count (the CPU cannot capture: the
    # stream maker and the graph are stand-ins that record what they were asked)
    asked = []

    class Graph:
        def replay(self):
            pass

    class Stream:
        def wait_stream(self, other):
            pass

    monkeypatch.setattr(db, "new_stream", lambda dev, kind, tokens=None: asked.append((kind, tokens)) or Stream())
    monkeypatch.setattr(db.torch.cuda, "CUDAGraph", Graph)
    monkeypatch.setattr(db.torch.cuda, "graph", lambda g, stream: contextlib.nullcontext())
    monkeypatch.setattr(db.torch.cuda, "stream", lambda s: contextlib.nullcontext())
    monkeypatch.setattr(db.torch.cuda, "current_stream", lambda dev: Stream())
    runs = []
    for c in (1, 16):
        db._capture_graph(lambda: runs.append(1), torch.device("cpu"), c)
    assert asked == [("main", 1), ("main", 16)] and len(runs) == 4


def test_the_kv_lane_stream_is_of_kind_kv_and_the_side_lane_of_kind_lane(monkeypatch):
    # the KV compressor's lane takes the priority KERNELBENCH_STREAM_PRIORITY gives "kv" (set apart in session 44),
    # every other side lane the priority of "lane"; one stream per lane, made once
    from kernelbench.decoder import lanes as L
    made = []
    monkeypatch.setattr(L, "new_stream", lambda device, kind: made.append(kind) or object())
    lanes = Lanes("cpu")
    kv, side = lanes._side_stream(KV_LANE), lanes._side_stream(SIDE_LANE)
    assert kv is not side and lanes._side_stream(KV_LANE) is kv
    assert made == ["kv", "lane"]


def test_stream_priority_names_what_is_unknown(monkeypatch):
    monkeypatch.setenv(KC.PRIORITY_ENV, "main,attention")
    with pytest.raises(ValueError, match="attention"):
        KC.high_priority_kinds()
    with pytest.raises(ValueError, match="kind 'side'"):
        KC.stream_priority("side")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU; runs on the device machine "
                    "(scripts/device_gpu_tests.sh rest)")
def test_gpu_streams_take_their_kinds_priority(monkeypatch):
    """KERNELBENCH_STREAM_PRIORITY=main,op: the capture stream and an op's side stream at the device's highest
    priority, the decoder's side lane at 0; "off" leaves the capture stream at 0."""
    dev = torch.device("cuda")
    monkeypatch.setenv(KC.PRIORITY_ENV, "main,op")
    high = torch.cuda.Stream.priority_range()[1]
    assert high < 0
    assert KC.new_stream(dev, "main").priority == high
    assert KC.new_stream(dev, "op").priority == high
    assert KC.new_stream(dev, "lane").priority == 0
    lanes = Lanes(dev, "all")
    assert lanes._side_stream().priority == 0
    monkeypatch.setenv(KC.PRIORITY_ENV, "off")
    assert KC.new_stream(dev, "main").priority == 0
    monkeypatch.delenv(KC.PRIORITY_ENV)          # the default: the main chain below the side lanes at one token
    assert KC.new_stream(dev, "main", 1).priority == 0 and KC.new_stream(dev, "lane", 1).priority == high
    assert KC.new_stream(dev, "main", 2).priority == high
