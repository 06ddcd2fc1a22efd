"""indexer_q and indexer_topk: top-k against an independent brute force in DeepSeek's bf16 arithmetic,
the bf16 roundings and the lower-index tie rule on hand-made rows, -1 padding, work independent of the
cache capacity, the Triton kernel against the reference (exact on fp32-exact scores, ties included;
hypothesis over ragged batches; the verify engine's check), bad inputs, and the sm_120 compile of
shipped configs."""
from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given

from kernelbench import registry
from kernelbench.kernels import indexer as K
from kernelbench.ops.indexer import fp4_rows
from kernelbench.reference.indexer import indexer_q, indexer_topk
from kernelbench.reference.precision import compute_dtype
from kernelbench.reference.quant import quant_fp8_weight
from kernelbench.reference.rope import rope_freqs
from kernelbench.config import FLASH
from kernelbench.harness.testing import assert_close
from test_attention import compile_sm120, sm120_problems, stale_unfit
from _kernel_check import needs_triton, run_impl, verify

registry.load_builtin()
SPEC = registry.get_op("indexer_topk")


def _exact_case(gen, t=3, hi=4, cap=64, positions=(40, 3, 255), ties=False):
    """FP4 keys and queries (few-bit mantissas) and bf16 weights k/64 with |k| < 16: every product and
    every partial sum is exact in fp32, so any summation order gives the same bits before each bf16
    rounding and top-k is unambiguous."""
    b = t + 1
    keys = torch.full((b, cap, 128), float("nan"), dtype=torch.bfloat16)
    seq = torch.randperm(b, generator=gen)[:t]
    pos = torch.tensor(positions[:t])
    for i in range(t):
        n = (int(pos[i]) + 1) // 4
        rows = fp4_rows((n, 128), gen)
        if ties and n > 1:
            rows[1::2] = rows[0::2][: rows[1::2].shape[0]]                # every odd row repeats its even row
        keys[int(seq[i]), :n] = rows
    qi = fp4_rows((t, hi, 128), gen)
    w = (torch.randint(-15, 16, (t, hi), generator=gen).float() / 64).bfloat16()
    return qi, w, keys, seq, pos


def _bf16(x: float) -> float:
    return float(torch.tensor(x, dtype=torch.float64).bfloat16())


def _brute(qi, w, keys, seq, pos, topk):
    """Scalar loops in DeepSeek's arithmetic: each head's dot rounded to bf16, relu, times w rounded to
    bf16, the head sum rounded to bf16 (exact in fp64 before each rounding for these inputs)."""
    out = []
    for i in range(qi.shape[0]):
        n = (int(pos[i]) + 1) // 4
        rows = keys[int(seq[i]), :n].double()
        sc = [_bf16(sum(_bf16(float(w[i, h]) * max(0.0, _bf16(float(qi[i, h].double() @ rows[j]))))
                        for h in range(qi.shape[1])))
              for j in range(n)]
        order = sorted(range(n), key=lambda j: (-sc[j], j))[:topk]
        out.append(order + [-1] * (topk - len(order)))
    return torch.tensor(out, dtype=torch.int32)


@pytest.mark.parametrize("ties", [False, True])
def test_reference_topk_equals_brute_force(gen, ties):
    qi, w, keys, seq, pos = _exact_case(gen, positions=(40, 3, 90), cap=30, ties=ties)
    idx, val = indexer_topk(qi, w, keys, seq, pos, topk=8)
    assert torch.equal(idx, _brute(qi, w, keys, seq, pos, 8))
    assert idx[1].tolist() == [0] + [-1] * 7 and torch.isneginf(val[1, 1:]).all()   # (3+1)//4 = 1 entry

def _tie_rows():
    """Two tokens, two heads, top-2 over 4 entries each, built so bf16 rounding makes a tie at the 2nd
    place that fp32 arithmetic would not have, with the higher-scoring fp32 candidate at the HIGHER index:
    token 0 (head 0 = e0 + e1, weight 1): dots 1, 3, 2, 2 + 2^-8; 2 + 2^-8 rounds to 2 (bf16 ulp at 2
      is 2^-6), so entries 2 and 3 tie at 2.0 -> {1, 2} (fp32 arithmetic: {1, 3});
    token 1 (head 0 = e0, head 1 = e1, weights 1, 1): head sums 1, 258, 256, 256 + 1; 257 is the bf16
      midpoint between 256 and 258 and rounds to even 256 -> ties with entry 2 -> {1, 2} (fp32: {1, 3})."""
    keys = torch.zeros(2, 4, 128, dtype=torch.float64)
    keys[0, :, 0] = torch.tensor([1.0, 3.0, 2.0, 2.0])
    keys[0, 3, 1] = 2.0 ** -8
    keys[1, :, 0] = torch.tensor([1.0, 258.0, 256.0, 256.0])
    keys[1, 3, 1] = 1.0
    qi = torch.zeros(2, 2, 128, dtype=torch.float64)
    qi[0, 0, :2] = 1.0
    qi[1, 0, 0] = qi[1, 1, 1] = 1.0
    w = torch.tensor([[1.0, 1.0], [1.0, 1.0]])
    return (qi.bfloat16(), w.bfloat16(), keys.bfloat16(), torch.tensor([0, 1]), torch.tensor([15, 15]))


@pytest.mark.parametrize("impl", ["reference", pytest.param("triton", marks=needs_triton)])
def test_bf16_ties_at_the_kth_place_choose_the_lower_index(impl):
    qi, w, keys, seq, pos = _tie_rows()
    fp32 = torch.relu(torch.einsum("thd,tsd->tsh", qi.float(), keys.float())).mul(w.float()[:, None]).sum(-1)
    assert fp32[:, 3].tolist() == [2.00390625, 257.0]                  # fp32 arithmetic has no tie ...
    assert torch.topk(fp32, 2).indices.sort().values.tolist() == [[1, 3], [1, 3]]   # ... and picks entry 3
    idx, val = run_impl("indexer_topk", impl, qi=qi, w=w, k_cache=keys, seq_ids=seq, positions=pos, topk=2)
    assert idx.tolist() == [[1, 2], [1, 2]]
    assert val.tolist() == [[3.0, 2.0], [258.0, 256.0]]
    assert val.dtype == torch.float32


@pytest.mark.parametrize("impl", ["reference", pytest.param("triton", marks=needs_triton)])
def test_the_weight_products_are_rounded_before_the_head_sum(impl):
    """Two heads, weights (1 + 2^-7, 1). Entry 0: head 1 alone, dot 1 + 2^-6 -> score 1 + 2^-6.
    Entry 1: head 0 dot 1 + 2^-7 times 1 + 2^-7 = 1 + 2^-6 + 2^-14 -> rounded to 1 + 2^-6; head 1 dot 2^-8;
    sum 1 + 2^-6 + 2^-8, the bf16 midpoint, -> even 1 + 2^-6: a tie with entry 0, lower index first.
    Unrounded products would sum past the midpoint to 1 + 3 * 2^-7 and put entry 1 first."""
    keys = torch.zeros(1, 2, 128, dtype=torch.float64)
    keys[0, 0, 1] = 1.0 + 2 ** -6
    keys[0, 1, 0], keys[0, 1, 1] = 1.0 + 2 ** -7, 2.0 ** -8
    qi = torch.zeros(1, 2, 128, dtype=torch.float64)
    qi[0, 0, 0] = qi[0, 1, 1] = 1.0
    w = torch.tensor([[1.0 + 2 ** -7, 1.0]])
    unrounded = (keys[0, 1, :2] * w[0]).sum()
    assert _bf16(float(unrounded)) == 1.0 + 3 * 2 ** -7
    idx, val = run_impl(
        "indexer_topk", impl, qi=qi.bfloat16(), w=w.bfloat16(), k_cache=keys.bfloat16(), seq_ids=torch.tensor([0]),
        positions=torch.tensor([7]), topk=2)
    assert idx.tolist() == [[0, 1]]
    assert val.tolist() == [[1.0 + 2 ** -6, 1.0 + 2 ** -6]]


def test_reference_scores_are_deepseeks_torch_expression(gen):
    """The official code on bf16 tensors: einsum, relu, times w, sum over heads; the reference's scores
    (as returned, sorted) must be those values bit for bit, also with fp64 accumulation between roundings."""
    t, hi, n = 2, 16, 300
    keys = torch.randn(t, n, 128, generator=gen).bfloat16()
    qi = torch.randn(t, hi, 128, generator=gen).bfloat16()
    w = (torch.randn(t, hi, generator=gen) * (128 ** -0.5 * hi ** -0.5)).bfloat16()
    seq, pos = torch.arange(t), torch.full((t,), 4 * n - 1)
    for i in range(t):
        off = torch.einsum("hd,sd->hs", qi[i], keys[i])
        off = (off.relu() * w[i][:, None]).sum(dim=0)
        want = torch.sort(off.float(), descending=True, stable=True)
        _, val = indexer_topk(qi, w, keys, seq, pos, topk=n)
        assert torch.equal(val[i], want.values)
        assert torch.unique(off).numel() < n                           # bf16 scores do tie here
    with compute_dtype(torch.float64):
        _, val64 = indexer_topk(qi, w, keys, seq, pos, topk=n)
    assert (val64 != val).float().mean() < 0.01                        # fp32 vs exact sums: rare 1-ulp moves


@needs_triton
def test_kernel_passes_the_verify_check_on_ties():
    for seed, layout in ((3, "contiguous"), (4, "strided")):
        verify("indexer_topk", {"T": 3, "Hi": 20, "topk": 40, "ctx": 397, "cap": 110, "ragged": True}, "ties", seed,
               layout)


def test_fewer_entries_than_topk_are_padded(gen):
    qi, w, keys, seq, pos = _exact_case(gen, positions=(2, 4, 21), cap=10)
    for name in ("reference", "triton"):
        idx, val = registry.get_impl("indexer_topk", name).fn(qi=qi, w=w, k_cache=keys, seq_ids=seq, positions=pos,
                                                              topk=8)
        assert idx[0].tolist() == [-1] * 8                                 # (2+1)//4 = 0 entries
        assert sorted(idx[1, :1].tolist()) == [0] and idx[1, 1:].tolist() == [-1] * 7
        assert sorted(idx[2, :5].tolist()) == [0, 1, 2, 3, 4] and idx[2, 5:].tolist() == [-1] * 3
        assert torch.isfinite(val[2, :5]).all() and torch.isneginf(val[2, 5:]).all()
        assert (val[2, :4] >= val[2, 1:5]).all()                           # best first


@pytest.mark.parametrize("ties,segments,fast", [(False, "fused", True), (True, "fused", True), (False, 1, True),
                                                 (True, 1, True), (True, 3, True), (True, "auto", True), (True, 1, False),
                                                 (True, 3, False)])
def test_kernel_exact_on_exact_scores(gen, ties, segments, fast):
    """Rows of 10, 1 and 69 entries against top-k 5, 16, 64: the select path and (fast) the rows that fit
    whole. "fused": impl triton_fused (one launch; BLOCK_S 16, so up to 5 programs of a token score and the
    last to arrive selects); else the two-launch impl triton, fast=False its first version (impl triton_v1:
    32-bit keys, always the select). SEGMENTS 3 / "auto" (4 programs per "SM", 4 on the CPU, over 3 tokens:
    5 then 4 programs) with SEG_MIN 8: the row of 69 is cut into 3 segments of 32, 32 and 5 scores (selected,
    selected, kept whole at top-k 5 and 16; all kept whole at 64, so the merge selects over every score), the row
    of 10 stays one program's; run twice, so the ticket counters were re-armed."""
    qi, w, keys, seq, pos = _exact_case(gen, hi=20, cap=70, positions=(40, 7, 279), ties=ties)
    for topk in (5, 16, 64):
        ref = indexer_topk(qi, w, keys, seq, pos, topk)
        for _ in range(2 if segments != 1 else 1):
            if segments == "fused":
                out = K.indexer_topk_fused(qi, w, keys, seq, pos, topk, config={
                    **K.fused_default({}), "BLOCK_S": 16, "SCAN": 32, "num_warps": 4, "waves": 4})
            else:
                out = K.indexer_topk(qi, w, keys, seq, pos, topk, config={
                    **K.indexer_default({}), "BLOCK_S": 64, "SCAN": 32, "TOPK_WARPS": 4, "SEGMENTS": segments,
                    "SEG_MIN": 8, "FAST": fast})
            assert torch.equal(out[0], ref[0]), (topk, out[0], ref[0])
            assert torch.equal(out[1], ref[1])


@pytest.mark.parametrize("fused,head_mma", [(False, False), (True, False), (False, True), (True, True)])
def test_score_blocks_whole_and_cut_give_every_score(gen, fused, head_mma):
    """The score launch's programs walk blocks j, j + P, ...: the whole ones unmasked, then the one that the row's
    length cuts. Rows of 64, 65 and 47 keys in blocks of 16 with P = 2 programs a token (waves 1 on the CPU's 4
    "SMs", 3 tokens): 2 whole blocks each and none cut; 2 whole and a cut one of 1 key on program 0; 1 whole and a
    cut one of 15 keys on program 0, 1 whole on program 1. top-k 80 returns every score, sorted: indices and
    scores exact against the reference. HEAD_MMA: the head sum as a matrix product (exact inputs: any order of the
    fp32 sum gives the same bits)."""
    qi, w, keys, seq, pos = _exact_case(gen, hi=20, cap=70, positions=(255, 259, 187))
    ref = indexer_topk(qi, w, keys, seq, pos, 80)
    if fused:
        out = K.indexer_topk_fused(qi, w, keys, seq, pos, 80, config={
            **K.fused_default({}), "BLOCK_S": 16, "SCAN": 32, "num_warps": 4, "waves": 1, "HEAD_MMA": head_mma})
    else:
        out = K.indexer_topk(qi, w, keys, seq, pos, 80, config={
            **K.indexer_default({}), "BLOCK_S": 16, "SCAN": 32, "TOPK_WARPS": 4, "SEGMENTS": 1, "waves": 1,
            "HEAD_MMA": head_mma})
    assert (ref[0] >= 0).sum(dim=1).tolist() == [64, 65, 47]
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])


@pytest.mark.parametrize("ties,segments,window", [(False, 1, 16), (True, 1, 6), (True, 3, 16), (False, 3, 128),
                                                    (True, "auto", 1)])
def test_csa_indices_write_the_attention_rows_from_the_top_k(gen, ties, segments, window):
    """csa_indices (the csa layer's lists from the top-k's registers, one launch fewer) against its reference (the
    two references composed) and bit for bit against its parts (indexer_topk, then attention_indices): the window ring
    (W = 6, 1: not powers of two; 128: the model's), W + each entry, -1 padding of rows shorter than top-k (position 3:
    one entry; 2: none), lengths W + min((p+1)//4, K); the one-program and the split top-k (3 segments, the ticket
    re-armed: run twice); exact-score inputs, with ties."""
    from kernelbench.reference.indexer import csa_indices
    qi, w, keys, seq, pos = _exact_case(gen, t=4, hi=20, cap=70, positions=(40, 3, 279, 2), ties=ties)
    for topk in (5, 64):
        ref = csa_indices(qi, w, keys, seq, pos, topk, window)
        parts = K.csa_indices_parts(qi, w, keys, seq, pos, topk, window)
        assert ref[0].shape == (4, window + topk) and ref[0].dtype == ref[1].dtype == torch.int32
        assert torch.equal(parts[0], ref[0]) and torch.equal(parts[1], ref[1])
        assert ref[1].tolist() == [window + min(n, topk) for n in (10, 1, 70, 0)]
        assert ref[0][3, window:].tolist() == [-1] * topk and ref[0][1, window + 1:].tolist() == [-1] * (topk - 1)
        cfg = {**K.indexer_default({}), "BLOCK_S": 64, "SCAN": 32, "TOPK_WARPS": 4, "SEGMENTS": segments,
               "SEG_MIN": 8}
        for _ in range(2):
            rows, lengths = K.csa_indices(qi, w, keys, seq, pos, topk, window, config=cfg)
            assert torch.equal(rows, ref[0]), (topk, rows, ref[0])
            assert torch.equal(lengths, ref[1])


def test_csa_indices_refuse_a_bad_window(gen):
    qi, w, keys, seq, pos = _exact_case(gen)
    for impl in ("reference", "triton", "triton_parts"):
        fn = registry.get_impl("csa_indices", impl).fn
        for bad in (0, -4, 2.0, True):
            with pytest.raises(ValueError, match="window"):
                fn(qi=qi, w=w, k_cache=keys, seq_ids=seq, positions=pos, topk=8, window=bad)
        with pytest.raises(ValueError, match="qi"):                         # indexer_topk's own checks apply
            fn(qi=qi.float(), w=w, k_cache=keys, seq_ids=seq, positions=pos, topk=8, window=16)


@pytest.mark.parametrize("fast", [True, False])
def test_split_topk_on_rows_shorter_than_the_top_k(gen, fast):
    """A row long enough for several segments (SEG_MIN 4) but shorter than the top-k (25 and 18 scores against 64)
    is the one-program top-k's: every score in order, then -1 padding. Session 28: the split kernel cut it into
    segments and its merge, which assumes at least top-k survivors, left the tail of the list unwritten (CPU
    `kernelbench verify csa_indices`, the covering path SEGMENTS 4 / SEG_MIN 4). indexer_topk and csa_indices, run
    twice (the ticket re-armed)."""
    qi, w, keys, seq, pos = _exact_case(gen, t=3, hi=20, cap=70, positions=(100, 71, 279), ties=False)
    cfg = {**K.indexer_default({}), "BLOCK_S": 64, "SCAN": 32, "TOPK_WARPS": 4, "SEGMENTS": 4, "SEG_MIN": 4,
           "FAST": fast}
    ref = indexer_topk(qi, w, keys, seq, pos, 64)
    assert (ref[0][0] == -1).sum() == 64 - 25 and (ref[0][1] == -1).sum() == 64 - 18
    _both_ops_twice_equal_the_reference(qi, w, keys, seq, pos, 64, 16, cfg)


def _both_ops_twice_equal_the_reference(qi, w, keys, seq, pos, topk, window, cfg):
    """indexer_topk and csa_indices with `cfg`, each run twice (a split top-k's tickets are re-armed), equal the
    reference ops bit for bit."""
    from kernelbench.reference.indexer import csa_indices
    ref = indexer_topk(qi, w, keys, seq, pos, topk)
    csa_ref = csa_indices(qi, w, keys, seq, pos, topk, window)
    for _ in range(2):
        out = K.indexer_topk(qi, w, keys, seq, pos, topk, config=cfg)
        assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
        rows, lengths = K.csa_indices(qi, w, keys, seq, pos, topk, window, config=cfg)
        assert torch.equal(rows, csa_ref[0]) and torch.equal(lengths, csa_ref[1])


def test_split_held_through_the_wrapper(gen):
    """Config SPLIT_HELD (held-only segments, held bounds and merge) through indexer_topk and csa_indices equals the
    reference on exact scores with ties (rows of 100 to 279 scores in 4 segments of SEG_MIN 8), run twice (the
    ticket re-armed); its plan falls back to the radix passes where the merge's candidates outgrow MAX_ROW_REGS, and
    it takes ROW_REGS "auto" only."""
    qi, w, keys, seq, pos = _exact_case(gen, t=3, hi=20, cap=300, positions=(1119, 400, 799), ties=True)
    cfg = {**K.indexer_default({}), "BLOCK_S": 64, "SCAN": 32, "TOPK_WARPS": 4, "SEGMENTS": 4, "SEG_MIN": 8,
           "SPLIT_HELD": True}
    plan = K.split_held_plan(cfg, 300, 4, 8, 16, 4)
    assert plan["MERGE_HELD"] and not plan["RADIX"] and plan["ROWB"] + plan["TAIL"] >= K.split_longest(300, 4, 8)
    _both_ops_twice_equal_the_reference(qi, w, keys, seq, pos, 16, 8, cfg)
    assert K.split_held_plan(cfg, 300, 64, 8, 1024, 4) == {"ROWB": 0}           # 64 x 1024 candidates
    with pytest.raises(ValueError, match="SPLIT_HELD"):
        K.split_held_plan({**cfg, "ROW_REGS": 1024}, 300, 4, 8, 16, 4)
    with pytest.raises(ValueError, match="SPLIT_HELD"):
        K.indexer_topk(qi, w, keys, seq, pos, 16, config={**cfg, "SPLIT_HELD": 1})


def test_split_topk_ties_across_segments(gen):
    """Every score equal, 3 segments: each selects its lowest 5 indices, the bound keeps all 15 candidates and the
    merge must return indices 0..4 (ties to the lower index across segments), as the one-program top-k."""
    qi, w, keys, seq, pos = _exact_case(gen, t=1, hi=20, cap=70, positions=(279,), ties=True)
    keys = torch.ones_like(keys)
    ref = indexer_topk(qi, w, keys, seq, pos, 5)
    assert torch.unique(ref[1]).numel() == 1 and ref[0].tolist() == [[0, 1, 2, 3, 4]]
    out = K.indexer_topk(qi, w, keys, seq, pos, 5, config={**K.indexer_default({}), "SCAN": 32, "TOPK_WARPS": 4,
                                                           "SEGMENTS": 3, "SEG_MIN": 8})
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])


SPLIT_SELECTS = {"radix": {"ROWB": 0}, "held": {"ROWB": 1024},
                 "held_merge": {"ROWB": 1024, "RADIX": False, "STAGE_HELD": True, "WINDOW": 512, "MERGE_HELD": True},
                 "held_merge_w2": {"ROWB": 128, "RADIX": False, "STAGE_HELD": True, "WINDOW": 2, "MERGE_HELD": True}}


@pytest.mark.parametrize("select", sorted(SPLIT_SELECTS))
@pytest.mark.parametrize("order", ["random", "ascending", "descending", "plateau"])
def test_split_topk_bounds_on_skewed_rows(order, select):
    """The split kernel on given bf16 score rows (its merge bounds depend on where the top-k lies): the whole top-k
    in the last segment (ascending), the first (descending), spread (random), or a plateau of equal scores across
    the k-th position; 4 segments of a 300-score row (SEG_MIN 16, top-k 20, FILTER 32: several filter chunks), and
    a row of 40 (one program). Against a stable descending sort: ties to the lower index. "held": the segments'
    select holds its scores in registers and counts (config ROW_REGS, _select_held); "held_merge": held-only
    segments (96 scores at most, `split_longest`) and the bounds and merge by the held search over the packed
    candidates (config SPLIT_HELD: MERGE_HELD), with the window and without it (2)."""
    held = SPLIT_SELECTS[select]
    assert K.split_longest(320, 4, 16) == 96
    g = torch.Generator().manual_seed(5)
    n_rows, cap, topk, seg = (300, 40), 320, 20, 4
    scores = _skew(torch.randn(2, cap, generator=g).bfloat16().float(), order, slice(5, 200))
    pos = torch.tensor([4 * n - 1 for n in n_rows])
    kp = 32
    idx = torch.full((2, topk), -7, dtype=torch.int32)
    val = torch.full((2, topk), float("nan"))
    for _ in range(2):                                           # the tickets are re-armed
        K._index_topk_split[(2, seg)](scores, pos, torch.zeros(2, 2 * seg * kp, dtype=torch.int64),
                                      torch.zeros(2, 2 * seg, dtype=torch.int64), torch.zeros(2, dtype=torch.int32),
                                      torch.zeros(2, kp, dtype=torch.int64), idx, val, 4, topk, seg, 16, cap, topk,
                                      SEG_P2=seg, KP=kp, SCAN=32, FAST=True, FILTER=32, **held)
        for r, n in enumerate(n_rows):
            want = torch.sort(scores[r, :n], descending=True, stable=True)
            assert idx[r].tolist() == want.indices[:topk].tolist(), (order, r)
            assert torch.equal(val[r], want.values[:topk])


def _topk_rows(scores, n_rows, topk, rowb, scan=256, warps=4, **held):
    """_index_topk (one program a row) on given score rows -> (idx, val) of each row's top-k. `held`: the held
    select's ROWL / RADIX constexprs."""
    t, kp = scores.shape[0], max(16, 1 << (topk - 1).bit_length())
    idx = torch.full((t, topk), -7, dtype=torch.int32, device=scores.device)
    val = torch.full((t, topk), float("nan"), device=scores.device)
    pos = torch.tensor([4 * n - 1 for n in n_rows], device=scores.device)
    stage = torch.zeros(t, kp, dtype=torch.int64, device=scores.device)
    K._index_topk[(t,)](scores, pos, stage, idx, val, 4, topk, scores.stride(0), idx.stride(0), KP=kp, SCAN=scan,
                        FAST=True, ROWB=rowb, num_warps=warps, **held)
    return idx, val


SKEWS = ("random", "ascending", "descending", "plateau", "equal", "negative")


def _skew(s: torch.Tensor, kind: str, plateau: slice) -> torch.Tensor:
    """Score rows s (bf16 values) rearranged in place so that each row's top-k lies spread ("random": as drawn), at
    the end ("ascending"), at the start ("descending"), across a plateau of equal scores at the k-th place
    ("plateau": the columns `plateau`), everywhere ("equal") or below zero ("negative"). -> s"""
    if kind == "ascending":
        s.copy_(torch.sort(s, dim=-1).values)
    elif kind == "descending":
        s.copy_(torch.sort(s, dim=-1, descending=True).values)
    elif kind == "plateau":
        s[..., plateau] = 0.5
    elif kind == "equal":
        s.fill_(0.25)
    elif kind == "negative":
        s.copy_((-s.abs() - 1.0).bfloat16().float())
    return s


def _rows_of(g, rows, cap: int) -> torch.Tensor:
    """bf16-valued score rows (len(rows), cap), row r's first n columns skewed as its kind ((n, kind) pairs; plateaus
    over all but 3 columns at each end)."""
    s = torch.randn(len(rows), cap, generator=g).bfloat16().float()
    for r, (n, kind) in enumerate(rows):
        _skew(s[r, :n], kind, slice(3, n - 3))
    return s


def _skewed_rows(g, rows: int, cap: int) -> torch.Tensor:
    """bf16-valued score rows cycling through the six SKEWS."""
    return _rows_of(g, [(cap, SKEWS[r % len(SKEWS)]) for r in range(rows)], cap)


# rows of every held block size of a 4096 ROW_REGS with uneven ones above half of it (a plateau or all-equal row
# there cannot tell a half-size block from the right one) and a row past it; top-k 64 selects in each
HELD_ROWS_4096 = ((3000, "random"), (4096, "ascending"), (2500, "descending"), (1500, "random"), (1000, "plateau"),
                  (500, "negative"), (4000, "equal"), (5000, "random"))


def test_held_row_select_equals_the_radix_select():
    """ROW_REGS: a row held in registers, its k-th key found by a binary search on counts (_select_held), gives the
    radix passes' result bit for bit and a stable descending sort's order (ties to the lower index). ROW_REGS 4096:
    rows of 500 / 1000 / 1500 / 2500-4096 bf16 scores take the held blocks of 512 / 1024 / 2048 / 4096 (the padding
    never counts), a row of 5000 the radix passes; top-k 64 and 512 (the row of 500 then has no select)."""
    g = torch.Generator().manual_seed(11)
    rows = HELD_ROWS_4096 + ((777, "random"),)
    n_rows = tuple(n for n, _ in rows)
    scores = _rows_of(g, rows, 5000)
    for topk in (64, 512):
        held = _topk_rows(scores, n_rows, topk, 4096)
        radix = _topk_rows(scores, n_rows, topk, 0)
        assert torch.equal(held[0], radix[0]) and torch.equal(held[1], radix[1])
        for r, n in enumerate(n_rows):
            want = torch.sort(scores[r, :n], descending=True, stable=True)
            k = min(n, topk)
            assert held[0][r].tolist() == want.indices[:k].tolist() + [-1] * (topk - k), (topk, r)
            assert torch.equal(held[1][r, :k], want.values[:k])


@pytest.mark.parametrize("levels", (1, 2, 4))
def test_held_only_select_at_every_level_count(levels):
    """ROW_LEVELS 1 / 2 / 4 held blocks, with the radix passes compiled in (RADIX True: the row of 5000 takes them)
    and without (RADIX False: the host's promise that no row exceeds ROW_REGS, `held_only`; rows of 500..4096),
    give the radix select's rows bit for bit on the skewed rows (ties, plateaus, all equal, all negative)."""
    g = torch.Generator().manual_seed(13)
    n_rows = tuple(n for n, _ in HELD_ROWS_4096)          # the last (5000) is past ROW_REGS
    scores = _rows_of(g, HELD_ROWS_4096, 5000)
    radix = _topk_rows(scores, n_rows, 64, 0)
    both = _topk_rows(scores, n_rows, 64, 4096, ROWL=levels)
    assert torch.equal(both[0], radix[0]) and torch.equal(both[1], radix[1])
    fits = _topk_rows(scores[:-1], n_rows[:-1], 64, 4096, ROWL=levels, RADIX=False)
    assert torch.equal(fits[0], radix[0][:-1]) and torch.equal(fits[1], radix[1][:-1])


def test_held_only_and_row_levels_choice():
    """The radix passes are left out only when the key cache cannot hold a row longer than ROW_REGS; ROW_LEVELS
    takes 1, 2 or 4."""
    assert [K.held_only(1024, cap) for cap in (1, 1023, 1024, 1025)] == [True, True, True, False]
    assert not K.held_only(0, 10) and not K.held_only(1024, 0)
    assert [K.row_levels(v) for v in (1, 2, 4)] == [1, 2, 4]
    for bad in (0, 3, 8, True, 2.0, "4"):
        with pytest.raises(ValueError, match="ROW_LEVELS"):
            K.row_levels(bad)


def test_held_plan_auto_and_explicit():
    """The select each config and cache gets. "auto" (the default): held-only in one block of the cache's capacity
    rounded up to a power of two (>= 1024) for the one-program top-k, the radix passes past 32768 entries or in the
    split top-k. An explicit ROW_REGS keeps the radix passes beside the held blocks unless the cache fits it."""
    auto = K.indexer_default({})
    assert auto["ROW_REGS"] == "auto"

    def plan(rowb, tail=0, levels=1, stage=True, window=512):
        return {"ROWB": rowb, "TAIL": tail, "ROWL": levels, "RADIX": False, "STAGE_HELD": stage, "WINDOW": window}
    assert K.held_plan(auto, 16400, False) == plan(16384, 512)     # decode-bench at 64K: 16384 + a tail of 512
    assert K.held_plan({**auto, "ROW_TAIL": False}, 16400, False) == plan(32768, stage=False)
    assert K.held_plan(auto, 16400, False, warps=8) == plan(16384, 256)
    assert K.held_plan({**auto, "STAGE_HELD": False}, 16400, False) == plan(16384, 512, stage=False)
    assert K.held_plan(auto, 16384, False) == plan(16384)
    assert K.held_plan(auto, 130, False) == plan(1024)
    assert K.held_plan({**auto, "ROW_LEVELS": 2}, 5000, False) == plan(4096, 1024, levels=2)
    assert K.held_plan(auto, 24000, False) == plan(16384, 8192)
    assert K.held_plan(auto, 24577, False) == plan(32768, stage=False)          # a tail of 16384: one block
    assert K.held_plan(auto, 32769, False) == {"ROWB": 0} and K.held_plan(auto, 16384, True) == {"ROWB": 0}
    assert K.held_plan({**auto, "ROW_REGS": 0}, 100, False) == {"ROWB": 0}
    assert K.held_plan({**auto, "SEARCH_WINDOW": 0}, 16400, False) == plan(16384, 512, window=0)
    assert K.held_plan({**auto, "ROW_REGS": 16384}, 16400, False) == {"ROWB": 16384, "ROWL": 4, "RADIX": True,
                                                                        "STAGE_HELD": True, "WINDOW": 512}
    assert K.held_plan({**auto, "ROW_REGS": 32768}, 100, False) == {"ROWB": 32768, "ROWL": 4, "RADIX": False,
                                                                     "STAGE_HELD": False, "WINDOW": 512}
    for key, bads in (("ROW_TAIL", (1, "yes", None)), ("STAGE_HELD", (1, "yes", None)),
                      ("SEARCH_WINDOW", (1, 3, 65536, -512, True, 512.0, "512"))):
        for bad in bads:
            with pytest.raises(ValueError, match=key):
                K.held_plan({**auto, key: bad}, 16400, False)
    assert {c["ROW_REGS"] for c in K.indexer_configs({})} == {"auto", 16384, 0}   # verify runs each select
    assert any(c.get("SPLIT_HELD") for c in K.indexer_configs({}))


def test_held_block_sizes():
    """ROW_REGS "auto"'s blocks: the capacity's power of two (>= 1024), or half of it and a tail of the excess (a
    power of two, one score per thread at least) where that tail is smaller than the half."""
    assert K.held_block(16400, 16) == (16384, 512) and K.held_block(16400, 16, tail=False) == (32768, 0)
    assert K.held_block(16384, 16) == (16384, 0) and K.held_block(100, 16) == (1024, 0)
    assert K.held_block(1030, 4) == (1024, 128) and K.held_block(1030, 16) == (1024, 512)  # one score a thread
    assert K.held_block(1030, 32) == (2048, 0)                      # a tail of 1024 (1024 threads) is no smaller
    assert K.held_block(20000, 16) == (16384, 4096) and K.held_block(24577, 16) == (32768, 0)


@pytest.mark.parametrize("levels", (1, pytest.param(4, marks=pytest.mark.slow)))   # 1: the "auto" default's levels
def test_held_stage_tail_block_and_window_equal_the_radix_select(levels):
    """The stage from the held registers (STAGE_HELD, _stage_block), a tail block after the held block (TAIL: rows
    of up to 4096 + 1024 held in a 4096 block and a 1024 tail) and the search's first count below the row's largest
    (WINDOW 512, where the k-th key of these rows lies; WINDOW 2, where it does not: the rest of the range) give the
    radix select's rows bit for bit on the skewed rows (ties, plateaus, all equal, all negative, one score far
    above the rest), with and without the radix passes compiled in; top-k 64 and 512."""
    g = torch.Generator().manual_seed(17)
    rows = HELD_ROWS_4096 + ((4097, "equal"), (5120, "plateau"), (4500, "random"))
    n_rows = tuple(n for n, _ in rows)
    scores = _rows_of(g, rows, 5120)
    scores[-1, 4321] = 2.0 ** 40                           # the k-th key lies far below the largest
    for topk in (64, 512):
        radix = _topk_rows(scores, n_rows, topk, 0)
        for held in ({"STAGE_HELD": True, "RADIX": False, "TAIL": 1024, "WINDOW": 512},
                     {"STAGE_HELD": False, "RADIX": False, "TAIL": 1024, "WINDOW": 2},
                     {"STAGE_HELD": True, "RADIX": True, "WINDOW": 0}):
            out = _topk_rows(scores, n_rows, topk, 4096, ROWL=levels, **held)
            assert torch.equal(out[0], radix[0]) and torch.equal(out[1], radix[1]), (topk, held)


def test_default_select_equals_the_radix_select_on_long_rows(gen):
    """The default top-k ("auto": held-only, one 4096 block for a cache of 2100 entries) against the radix passes
    (ROW_REGS 0) through the wrapper on exact scores with ties, rows of 2000+ scores past the top-k."""
    qi, w, keys, seq, pos = _exact_case(gen, hi=8, cap=2100, positions=(8399, 8003, 5001), ties=True)
    base = {**K.indexer_default({}), "BLOCK_S": 64, "SCAN": 512, "TOPK_WARPS": 4}
    ref = K.indexer_topk(qi, w, keys, seq, pos, 64, config={**base, "ROW_REGS": 0})
    out = K.indexer_topk(qi, w, keys, seq, pos, 64, config=base)
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
    assert (out[0] >= 0).all()


def test_row_regs_config(gen):
    """ROW_REGS through the wrapper (csa_indices and indexer_topk take it from the config) equals the default on exact
    scores with ties; a bad value is refused with its name."""
    qi, w, keys, seq, pos = _exact_case(gen, hi=20, cap=70, positions=(40, 7, 279), ties=True)
    base = {**K.indexer_default({}), "BLOCK_S": 64, "SCAN": 32, "TOPK_WARPS": 4}
    ref = K.indexer_topk(qi, w, keys, seq, pos, 16, config=base)
    for extra in ({}, {"ROW_LEVELS": 1}, {"ROW_LEVELS": 2}):   # a cache of 70 keys: the held-only kernel
        out = K.indexer_topk(qi, w, keys, seq, pos, 16, config={**base, "ROW_REGS": 1024, **extra})
        assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
    for bad in (512, 3000, 65536, True, False, 2048.0, -1024):
        with pytest.raises(ValueError, match="ROW_REGS"):
            K.indexer_topk(qi, w, keys, seq, pos, 16, config={**base, "ROW_REGS": bad})
    with pytest.raises(ValueError, match="ROW_LEVELS"):
        K.indexer_topk(qi, w, keys, seq, pos, 16, config={**base, "ROW_REGS": 1024, "ROW_LEVELS": 3})


@pytest.mark.gpu
def test_gpu_held_row_select_equals_the_radix_select():
    """On the GPU at the long-context row length (64K tokens: 16384 scores a row; the decode step's cache: up to
    16,400) and the default top-k launch (SCAN 4096, 16 warps): ROW_REGS 16384 and 32768 give the radix passes' rows
    bit for bit, and a stable sort's; so do the held-only kernels (no radix passes compiled in) with 1, 2 and 4 held
    block sizes, a 16384 block with a 512 tail (the default at 16,400 entries), the stage from the held registers
    (STAGE_HELD) and the search's first count below the row's largest (WINDOW)."""
    g = torch.Generator().manual_seed(12)
    n_rows = (16384, 16384, 16384, 16000, 16384, 9000, 16400, 16390, 16399, 16385, 16400, 16400)
    scores = _skewed_rows(g, len(n_rows), 16400).cuda()
    radix = _topk_rows(scores, n_rows, 512, 0, scan=4096, warps=16)
    short = len(n_rows) - 6                                 # the first six rows fit a 16384 block
    for rowb, held_kw in ((16384, {}), (32768, {}), (16384, {"ROWL": 1, "RADIX": False}),
                          (32768, {"ROWL": 1, "RADIX": False}), (32768, {"ROWL": 2, "RADIX": False}),
                          (32768, {"ROWL": 4, "RADIX": False}), (16384, {"ROWL": 1, "RADIX": False, "TAIL": 512,
                                                                         "STAGE_HELD": True}),
                          (16384, {"ROWL": 1, "RADIX": False, "TAIL": 512}), (16384, {"STAGE_HELD": True}),
                          (16384, {"ROWL": 1, "RADIX": False, "TAIL": 512, "STAGE_HELD": True, "WINDOW": 512}),
                          (16384, {"ROWL": 1, "RADIX": False, "TAIL": 512, "STAGE_HELD": True, "WINDOW": 2})):
        rows = slice(None) if held_kw.get("TAIL") or rowb == 32768 or held_kw.get("RADIX", True) else slice(short)
        held = _topk_rows(scores[rows], n_rows[rows], 512, rowb, scan=4096, warps=16, **held_kw)
        assert torch.equal(held[0], radix[0][rows]) and torch.equal(held[1], radix[1][rows]), (rowb, held_kw)
    for r, n in enumerate(n_rows):
        want = torch.sort(scores[r, :n].cpu(), descending=True, stable=True)
        assert radix[0][r].tolist() == want.indices[:512].tolist(), r


@pytest.mark.gpu
def test_gpu_packed_head_terms_equal_the_fp32_path():
    """On the GPU the score launch's head terms in bf16x2 PTX (BF16X2, the default) give the fp32 path's scores bit
    for bit, at the Flash rank's 64 heads and a 64K-token cache (16,400 entries) for rows that end on a block, just
    past one and mid-block, in blocks of 64 and 128; and equal the reference's scores key by key within what a
    head's dot rounded the other way can move, differing in under 1% of the keys. (Sorted lists are not compared:
    a moved score changes rank where neighbours are several ulps apart; session 32's H200 run of that form found 4
    of 16,385 ranks at ~0.1 apart by 1-3 bf16 ulps.)"""
    g = torch.Generator().manual_seed(21)
    t, hi, cap = 6, 64, 16400
    qi = torch.randn(t, hi, 128, generator=g).bfloat16().cuda()
    w = (torch.randn(t, hi, generator=g) / 8).bfloat16().cuda()
    keys = torch.randn(t + 1, cap, 128, generator=g).bfloat16().cuda()
    seq = torch.randperm(t + 1, generator=g)[:t].cuda()
    n_rows = (16384, 16385, 16400, 16327, 128, 1)
    pos = torch.tensor([4 * n + 2 for n in n_rows]).cuda()                # (p + 1) // 4 = n keys
    for bs in (64, 128):
        cfg = {**K.indexer_default({}), "BLOCK_S": bs}
        packed = K.index_scores(qi, w, keys, seq, pos, 4, 1.0, cfg, qi.device)
        plain = K.index_scores(qi, w, keys, seq, pos, 4, 1.0, {**cfg, "BF16X2": False}, qi.device)
        for r, n in enumerate(n_rows):
            assert torch.equal(packed[r, :n], plain[r, :n]), (bs, r)
            assert torch.isfinite(packed[r, :n]).all()
    ref_idx, ref_val = indexer_topk(qi.cpu(), w.cpu(), keys.cpu(), seq.cpu(), pos.cpu(), 16400)
    for r, n in enumerate(n_rows):
        by_key = torch.full((n,), float("nan"))
        by_key[ref_idx[r, :n].long()] = ref_val[r, :n]                     # every key's score, by key
        mine = packed[r, :n].cpu()
        # a head's dot that the tensor cores' fp32 sum rounds to the neighbouring bf16 value moves its term by a
        # bf16 ulp: the score by up to 2^-7 of the sum of the terms' sizes (where the terms cancel, far more than
        # a ulp of the score), plus a ulp of the score's own rounding
        dots = keys[int(seq[r]), :n].cpu().float() @ qi[r].cpu().float().T            # (n, Hi)
        size = (dots.clamp_min(0) * w[r].cpu().float().abs()).sum(dim=1)
        assert ((mine - by_key).abs() <= (size + by_key.abs()) * 2.0 ** -7 + 1e-6).all(), f"row {r}"
        assert (mine != by_key).float().mean() < 0.01, f"row {r}"


@pytest.mark.gpu
def test_gpu_head_sum_on_tensor_cores_matches_the_cuda_core_sum():
    """HEAD_MMA (the head sum as terms @ ones on the tensor cores) at 4 and 8 warps, blocks of 64 and 128, the Flash
    rank's 64 heads and a 64K-token cache: bit for bit the default's scores where every partial sum is exact in fp32
    (the exact case's FP4 keys and queries), and on random bf16 inputs within one bf16 ulp of them (1e-4 where a sum
    cancels), differing in under 1% of the scores (where the fp32 sum's last bits cross a bf16 rounding boundary)."""
    g = torch.Generator().manual_seed(23)
    qi, w, keys, seq, pos = _exact_case(g, t=3, hi=64, cap=16400, positions=(65599, 4 * 16385 + 3, 4 * 127 + 3))
    qi, w, keys, seq, pos = (x.cuda() for x in (qi, w, keys, seq, pos))
    n_rows = [(int(p) + 1) // 4 for p in pos]
    gr = torch.Generator().manual_seed(24)
    rq = torch.randn(3, 64, 128, generator=gr).bfloat16().cuda()
    rw = (torch.randn(3, 64, generator=gr) / 8).bfloat16().cuda()
    rk = torch.randn(4, 16400, 128, generator=gr).bfloat16().cuda()
    for bs, warps in ((64, 4), (128, 4), (128, 8)):
        cfg = {**K.indexer_default({}), "BLOCK_S": bs, "num_warps": warps}
        for args in ((qi, w, keys), (rq, rw, rk)):
            plain = K.index_scores(*args, seq, pos, 4, 1.0, cfg, qi.device)
            mma = K.index_scores(*args, seq, pos, 4, 1.0, {**cfg, "HEAD_MMA": True}, qi.device)
            for r, n in enumerate(n_rows):
                a, b = plain[r, :n], mma[r, :n]
                assert torch.isfinite(b).all(), (bs, warps, r)
                if args[0] is qi:
                    assert torch.equal(a, b), (bs, warps, r)
                else:
                    near = a.abs() * 2.0 ** -7 + 1e-4          # a bf16 ulp; atol for sums that cancel to ~0
                    assert ((a - b).abs() <= near).all(), (bs, warps, r)
                    assert (a != b).float().mean() < 0.01, (bs, warps, r)


def test_topk_segments_choice():
    cpu = torch.device("cpu")                                       # sm_count 4 off the GPU
    assert [K.topk_segments("auto", t, cpu, 1 << 20, 16) for t in (1, 3, 4, 16, 17)] == [16, 4, 4, 1, 1]
    assert [K.topk_segments("auto", 1, cpu, cap, 16) for cap in (15, 16, 47, 48, 64)] == [1, 1, 2, 2, 4]
    assert K.topk_segments(5, 64, cpu, 8, 16) == 5 and K.topk_segments(1, 1, cpu, 1 << 20, 16) == 1
    # a row the one-program top-k holds (ROW_REGS "auto", capacity <= MAX_ROW_REGS) is not split by "auto"
    assert K.topk_segments("auto", 1, cpu, 1 << 20, 16, held=True) == 1
    assert K.topk_segments(4, 1, cpu, 1 << 20, 16, held=True) == 4
    assert [K.holds_row({}, cap) for cap in (0, 1, K.MAX_ROW_REGS, K.MAX_ROW_REGS + 1)] == [False, True, True, False]
    assert not K.holds_row({"ROW_REGS": 0}, 16) and not K.holds_row({"ROW_REGS": 1024}, 16)
    assert [K.seg_min_default(t) for t in (1, 4, 5, 64)] == [4096, 4096, 16384, 16384]
    for bad in (0, -1, K.MAX_SEGMENTS + 1, "8", True):
        with pytest.raises(ValueError, match="SEGMENTS"):
            K.topk_segments(bad, 1, cpu, 1 << 20, 16)
    with pytest.raises(ValueError, match="SEG_MIN"):
        K.topk_segments("auto", 1, cpu, 1 << 20, 0)


def test_scan_width_bounds():
    """_stage_top packs two per-step counts of up to SCAN in 16 bits each: wider steps are refused on the host."""
    assert [K.scan_width(v) for v in (1, 32, 4096, K.MAX_SCAN)] == [1, 32, 4096, 16384]
    for bad in (0, 48, 2 * K.MAX_SCAN, True, "4096"):
        with pytest.raises(ValueError, match="SCAN"):
            K.scan_width(bad)
    qi, w = torch.randn(1, 2, 128, dtype=torch.bfloat16), torch.randn(1, 2, dtype=torch.bfloat16)
    keys = torch.randn(1, 64, 128, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="SCAN"):
        K.indexer_topk(qi, w, keys, torch.zeros(1, dtype=torch.int32), torch.tensor([255]), 8,
                       config={**K.indexer_default({}), "SCAN": 32768})


@pytest.mark.parametrize("impl", ["triton", "triton_fused"])
def test_w_scale_inside_the_op_equals_the_scaled_weights(gen, impl):
    """w_scale (the decoder's 128^-0.5 * Hi^-0.5) applied in the op = DeepSeek's bf16 `w * scale` before it."""
    qi, w, keys, seq, pos = _exact_case(gen, hi=20, cap=70, positions=(40, 7, 279), ties=True)
    scale = 128 ** -0.5 * 20 ** -0.5
    ref = indexer_topk(qi, w * scale, keys, seq, pos, 16)
    assert all(torch.equal(a, b) for a, b in zip(indexer_topk(qi, w, keys, seq, pos, 16, w_scale=scale), ref))
    fn = registry.get_impl("indexer_topk", impl).fn
    out = fn(qi=qi, w=w, k_cache=keys, seq_ids=seq, positions=pos, topk=16, w_scale=scale)
    assert torch.equal(out[0], ref[0]) and torch.equal(out[1], ref[1])
    for bad in (0.0, float("nan"), -1.0, "0.1"):
        with pytest.raises(ValueError, match="w_scale"):
            fn(qi=qi, w=w, k_cache=keys, seq_ids=seq, positions=pos, topk=16, w_scale=bad)


def test_result_independent_of_capacity(gen):
    """Same entries in caches of capacity 20 and 400 (the rest NaN): identical results. A kernel that
    scored the capacity would read NaN rows and select them."""
    qi, w, small, seq, pos = _exact_case(gen, cap=20, positions=(40, 3, 79))
    big = torch.full((small.shape[0], 400, 128), float("nan"), dtype=torch.bfloat16)
    big[:, :20] = small
    for name in ("reference", "triton"):
        fn = registry.get_impl("indexer_topk", name).fn
        a = fn(qi=qi, w=w, k_cache=small, seq_ids=seq, positions=pos, topk=12)
        b = fn(qi=qi, w=w, k_cache=big, seq_ids=seq, positions=pos, topk=12)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
        assert int(a[0].max()) < 20


@given(SPEC.strategy())
def test_kernel_matches_reference_hypothesis(p):
    gen = torch.Generator().manual_seed(11)
    for mode in SPEC.value_modes:
        inp = SPEC.make_inputs(p, gen, "cpu", mode)
        with compute_dtype(torch.float64):
            ref = SPEC.reference(**inp)
        out = K.indexer_topk(**inp)
        tol = SPEC.tolerance(p)
        assert_close(out[1], ref[1], tol["scores"], "scores")
        assert_close(out[0], ref[0], tol["indices"], "indices")
        # every selected entry is a real one of that token, no duplicates
        n = (inp["positions"] + 1) // 4
        for i in range(p["T"]):
            sel = out[0][i][out[0][i] >= 0]
            assert sel.numel() == min(int(n[i]), p["topk"]) and sel.unique().numel() == sel.numel()
            assert sel.numel() == 0 or int(sel.max()) < int(n[i])


def test_indexer_q_format(gen):
    t, hi, qr = 3, 2, 128
    wq, ws = quant_fp8_weight(torch.randn(hi * 128, qr, generator=gen) * qr ** -0.5)
    x = torch.randn(t, qr, generator=gen).bfloat16()
    qi = indexer_q(x, wq, ws, torch.tensor([0, 9, 70000]), rope_freqs(FLASH, compressed=True))
    assert qi.shape == (t, hi, 128) and qi.dtype == torch.bfloat16
    g = qi.float().view(-1, 32)
    scale = torch.exp2(torch.ceil(torch.log2(g.abs().amax(-1, keepdim=True).clamp_min(1e-30) / 6)))
    e2m1 = torch.tensor([0, 0.5, 1, 1.5, 2, 3, 4, 6])
    assert torch.isin((g / scale).abs(), e2m1).all()                       # FP4 codes times a power of two


def test_indexer_q_kernel_matches_reference(gen):
    t, hi, qr = 3, 4, 256
    wq, ws = quant_fp8_weight(torch.randn(hi * 128, qr, generator=gen) * qr ** -0.5)
    x = torch.randn(t, qr, generator=gen).bfloat16()
    pos, fr = torch.tensor([0, 9, 700000]), rope_freqs(FLASH, compressed=True)
    ref = indexer_q(x, wq, ws, pos, fr)
    out = K.indexer_q(x, wq, ws, pos, fr)
    assert_close(out, ref, registry.get_op("indexer_q").tolerance({})["qi"], "qi")
    with pytest.raises(ValueError, match="positions"):
        K.indexer_q(x, wq, ws, pos[:2], fr)


@pytest.mark.parametrize("cfg", [{"BM": 16, "BN": 64, "SPLIT": 2}, {"BM": 16, "BN": 32, "SPLIT": 1}])
def test_indexer_q_one_launch_equals_two(gen, cfg):
    """The fused kernel (GEMM, split-K ticket, per-head ticket, RoPE + Hadamard on tensor cores + FP4 in registers)
    against the two-launch version: 2 row blocks (T = 20), 2 or 4 tiles per head, run twice (tickets are reset by
    the kernel); the Hadamard sums differ only in fp32 order, so at most rare last-bit moves. PREFETCH "staged" (the
    GEMM's scales a step ahead) is the same result bit for bit; PATH "split" refuses it (it would ignore it)."""
    t, hi, qr = 20, 3, 256
    wq, ws = quant_fp8_weight(torch.randn(hi * 128, qr, generator=gen) * qr ** -0.5)
    x = torch.randn(t, qr, generator=gen).bfloat16()
    pos, fr = torch.randint(0, 100000, (t,), generator=gen), rope_freqs(FLASH, compressed=True)
    ref = K.indexer_q_v1(x, wq, ws, pos, fr)
    full = {**K.indexer_q_default({"T": t, "Hi": hi, "Qr": qr}), **cfg, "PATH": "fused"}
    for _ in range(2):
        out = K.indexer_q(x, wq, ws, pos, fr, config=full)
        assert_close(out, ref, registry.get_op("indexer_q").tolerance({})["qi"], "qi")
        assert (out != ref).float().mean() < 0.01
    assert torch.equal(K.indexer_q(x, wq, ws, pos, fr, config={**full, "num_stages": 3, "PREFETCH": "staged"}),
                       K.indexer_q(x, wq, ws, pos, fr, config={**full, "num_stages": 3}))
    with pytest.raises(ValueError, match="PREFETCH is the fused path's"):
        K.indexer_q(x, wq, ws, pos, fr, config={**full, "PATH": "split", "PREFETCH": "staged"})
    # config XQ "gemm": x quantized in the GEMM's K loop (no act_quant launch), the same codes: bit for bit
    assert torch.equal(K.indexer_q(x, wq, ws, pos, fr, config={**full, "XQ": "gemm"}),
                       K.indexer_q(x, wq, ws, pos, fr, config=full))
    with pytest.raises(ValueError, match="XQ is the fused path's"):
        K.indexer_q(x, wq, ws, pos, fr, config={**full, "PATH": "split", "XQ": "gemm"})


def test_indexer_q_one_token_gemv_and_its_limits(gen):
    """At one token the fused path's GEMM may be fp8_linear's BM 1 GEMV (the default tile there, front.py's
    _epilogue_default): against the two-launch version as above; above one token the GEMV quantizes each bf16 row
    itself as well (a verify path of a one-token tuned entry draws several tokens) and matches too; an NB that does
    not divide a split's K blocks is refused (front.py _gemm_split)."""
    hi, qr = 3, 512
    wq, ws = quant_fp8_weight(torch.randn(hi * 128, qr, generator=gen) * qr ** -0.5)
    x = torch.randn(2, qr, generator=gen).bfloat16()
    pos, fr = torch.tensor([77, 5]), rope_freqs(FLASH, compressed=True)
    gemv = {**K.indexer_q_default({"T": 1, "Hi": hi, "Qr": qr}), "BM": 1, "BN": 64, "NB": 2, "SPLIT": 2,
            "PATH": "fused"}
    ref = K.indexer_q_v1(x[:1], wq, ws, pos[:1], fr)
    out = K.indexer_q(x[:1], wq, ws, pos[:1], fr, config=gemv)
    assert_close(out, ref, registry.get_op("indexer_q").tolerance({})["qi"], "qi")
    assert (out != ref).float().mean() < 0.01
    two = K.indexer_q(x, wq, ws, pos, fr, config=gemv)
    ref2 = K.indexer_q_v1(x, wq, ws, pos, fr)
    assert_close(two, ref2, registry.get_op("indexer_q").tolerance({})["qi"], "qi")
    assert torch.equal(two[:1], out)                                  # row 0 does not depend on row 1
    with pytest.raises(ValueError, match="SPLIT_SUM is the fused path's"):
        K.indexer_q(x, wq, ws, pos, fr, config={**gemv, "PATH": "split", "SPLIT_SUM": "head"})
    with pytest.raises(ValueError, match="NB=4"):
        K.indexer_q(x[:1], wq, ws, pos[:1], fr, config={**gemv, "NB": 4})


def test_indexer_q_one_token_space_holds_the_widest_split_gemv(gen):
    """At one token the space offers the one-launch GEMV in the shape that won in the step (session 23: NB 1, the
    K split at its widest, 4 warps) beside the default's; every BM 1 config of the space against the two-launch
    version (Qr 512: SPLIT 4), run twice (tickets re-armed)."""
    hi, qr = 3, 512
    wq, ws = quant_fp8_weight(torch.randn(hi * 128, qr, generator=gen) * qr ** -0.5)
    x = torch.randn(1, qr, generator=gen).bfloat16()
    pos, fr = torch.tensor([77]), rope_freqs(FLASH, compressed=True)
    space = [c for c in K.indexer_q_configs({"T": 1, "Hi": hi, "Qr": qr}) if c["BM"] == 1]
    assert any((c["BN"], c["NB"], c["SPLIT"], c["num_warps"], c["PATH"]) == (64, 1, qr // 128, 4, "fused")
               for c in space), space
    ref = K.indexer_q_v1(x, wq, ws, pos, fr)
    outs = {}
    for cfg in space:
        for _ in range(2):
            out = K.indexer_q(x, wq, ws, pos, fr, config=cfg)
            assert_close(out, ref, registry.get_op("indexer_q").tolerance({})["qi"], "qi")
            assert (out != ref).float().mean() < 0.01, cfg
        outs[json.dumps(cfg, sort_keys=True)] = out
    # the fused GEMVs with split K once more with one ticket stage (SPLIT_SUM "head"): the same sums in the same
    # split order, so the same bits as the two-stage form
    heads = [c for c in space if c.get("SPLIT_SUM") == "head"]
    assert heads and all(c["PATH"] == "fused" and c["SPLIT"] > 1 for c in heads)
    for c in heads:
        tile = {k: v for k, v in c.items() if k != "SPLIT_SUM"}
        assert torch.equal(outs[json.dumps(c, sort_keys=True)], outs[json.dumps(tile, sort_keys=True)]), c


@pytest.mark.parametrize("t, hi", [(1, 3), (7, 5)])
def test_indexer_q_rows_epilogue_equals_the_row_epilogue(gen, t, hi):
    """The split path's epilogue in registers (EPI "rows": RB_EPI (token, head) rows per program, the Hadamard on
    tensor cores) against the one-row-per-program epilogue: 3 rows (one masked program) and 35 rows (three programs,
    the last partial); the Hadamard sums differ only in fp32 order, so at most rare last-bit moves. An unknown EPI is
    refused."""
    qr = 256
    wq, ws = quant_fp8_weight(torch.randn(hi * 128, qr, generator=gen) * qr ** -0.5)
    x = torch.randn(t, qr, generator=gen).bfloat16()
    pos, fr = torch.randint(0, 100000, (t,), generator=gen), rope_freqs(FLASH, compressed=True)
    split = {**K.indexer_q_default({"T": t, "Hi": hi, "Qr": qr}), "PATH": "split"}
    ref = K.indexer_q(x, wq, ws, pos, fr, config=split)
    out = K.indexer_q(x, wq, ws, pos, fr, config={**split, "EPI": "rows", "EPI_WARPS": 4})
    assert_close(out, ref, registry.get_op("indexer_q").tolerance({})["qi"], "qi")
    assert (out != ref).float().mean() < 0.01
    assert_close(out, indexer_q(x, wq, ws, pos, fr), registry.get_op("indexer_q").tolerance({})["qi"], "qi")
    with pytest.raises(ValueError, match="EPI='row2'"):
        K.indexer_q(x, wq, ws, pos, fr, config={**split, "EPI": "row2"})


def test_indexer_topk_bad_inputs(gen):
    qi, w, keys, seq, pos = _exact_case(gen, cap=30, positions=(40, 3, 79))
    for fn in (indexer_topk, K.indexer_topk):
        with pytest.raises(ValueError, match="w must be"):
            fn(qi, w[:, :2], keys, seq, pos, 4)
        with pytest.raises(ValueError, match="k_cache"):
            fn(qi, w, keys[..., :64], seq, pos, 4)
        with pytest.raises(ValueError, match="positive"):
            fn(qi, w, keys, seq, pos, 0)
        with pytest.raises(ValueError, match="qi"):
            fn(qi.float(), w, keys, seq, pos, 4)
    with pytest.raises(ValueError, match="capacity"):
        indexer_topk(qi, w, keys, seq, pos + 200, 4)


SCORES_SIG = {"qi_ptr": "*bf16", "w_ptr": "*bf16", "k_ptr": "*bf16", "seq_ptr": "*i64", "pos_ptr": "*i64",
              "sc_ptr": "*fp32", "HI": "i32", "RATIO": "i32", "P": "i32", "w_scale": "fp32", "s_qt": "i32", "s_qh": "i32",
              "s_wt": "i32", "s_kb": "i64", "s_kn": "i32", "s_st": "i32", "DI": "constexpr", "BLOCK_HI": "constexpr",
              "BLOCK_S": "constexpr", "DOT_UPCAST": "constexpr", "RNE_FIX": "constexpr", "ASM": "constexpr",
              "HEAD_MMA": "constexpr"}
FUSED_SIG = {"qi_ptr": "*bf16", "w_ptr": "*bf16", "k_ptr": "*bf16", "seq_ptr": "*i64", "pos_ptr": "*i64", "sc_ptr": "*fp32",
             "cnt_ptr": "*i32", "stage_ptr": "*i64", "idx_ptr": "*i32", "val_ptr": "*fp32", "HI": "i32", "RATIO": "i32",
             "P": "i32", "TOPK": "i32", "w_scale": "fp32", "s_qt": "i32", "s_qh": "i32", "s_wt": "i32", "s_kb": "i64",
             "s_kn": "i32", "s_st": "i32", "s_ot": "i32", "DI": "constexpr", "BLOCK_HI": "constexpr",
             "BLOCK_S": "constexpr", "KP": "constexpr", "SCAN": "constexpr", "DOT_UPCAST": "constexpr",
             "RNE_FIX": "constexpr", "ASM": "constexpr", "HEAD_MMA": "constexpr"}
TOPK_SIG = {"sc_ptr": "*fp32", "pos_ptr": "*i64", "stage_ptr": "*i64", "idx_ptr": "*i32", "val_ptr": "*fp32",
            "RATIO": "i32", "TOPK": "i32", "s_st": "i32", "s_ot": "i32", "KP": "constexpr", "SCAN": "constexpr",
            "FAST": "constexpr"}


SPLIT_SIG = {"sc_ptr": "*fp32", "pos_ptr": "*i64", "cand_ptr": "*i64", "thr_ptr": "*i64", "cnt_ptr": "*i32",
             "stage_ptr": "*i64", "idx_ptr": "*i32", "val_ptr": "*fp32", "RATIO": "i32", "TOPK": "i32", "SEG": "i32",
             "SEG_MIN": "i32", "s_st": "i32", "s_ot": "i32", "SEG_P2": "constexpr", "KP": "constexpr",
             "SCAN": "constexpr", "FAST": "constexpr", "FILTER": "constexpr"}


QFUSED_SIG = {"x_ptr": "*bf16", "sx_ptr": "*fp32", "w_ptr": "*fp8e4nv", "ws_ptr": "*u8", "y_ptr": "*bf16",
              "part_ptr": "*fp32", "cnt_ptr": "*i32", "pos_ptr": "*i64", "f_ptr": "*fp32", "M": "i32", "N": "i32",
              "K": "i32", "sxm": "i32", "HL": "i32", "R": "constexpr", "KB_SPLIT": "constexpr", "BM": "constexpr",
              "BN": "constexpr", "SPLIT": "constexpr", "RB": "constexpr", "QUANT": "constexpr", "HW_CVT": "constexpr",
              "RNE_FIX": "constexpr", "DOT_UPCAST": "constexpr"}
QEPI_SIG = {"q_ptr": "*bf16", "pos_ptr": "*i64", "f_ptr": "*fp32", "out_ptr": "*bf16", "HI": "i32", "R": "constexpr",
            "RNE_FIX": "constexpr"}


# Opt-in (KB_SLOW=1): compiling every shipped config from a cold Triton cache costs about 120 s of CI CPU. Still covered
# in the default run: tests/test_sm120.py (every implementation's default config at every Flash TP8 shape, sm_120
# limits and tensor-core instructions) and the tuned entries' own sm_120 check at export (`kernelbench tune`);
# every config of the space: `kernelbench inspect indexer_topk indexer_q --target sm_120 --all-configs`.
HELD_ROWS = max(c["ROW_REGS"] for c in K.indexer_configs({}) if isinstance(c["ROW_REGS"], int))   # 16384


# Configs of this space unfit for sm_120 as compiled here (register spills, ptxas -v, or shared memory past the limit;
# session 31, when this check first counted spills, which it had read as cuobjdump's LOCAL, always 0 for them, and
# first compiled with a launch's alignment: `compile_sm120`; the radix and split top-k at SCAN 8192, 16 warps also in
# the inspector's capture of a real launch). The tuner's sm_120 check records each invalid_spill / invalid_smem, so
# none ships in a tuned table; the radix top-k (ROW_REGS 0 / 16384 beside the held select) at SCAN 8192 and 16 warps,
# the split top-k at 64 segments, and the held-only 32768 block staging by a pass (STAGE_HELD false) spill 16-644 B.
# The default held select at 64K (16384 (+ 512) held as two halves, `_select_held`) does not. `stale_unfit` fails the
# test when one fits again: drop it here.
SM120_KNOWN_UNFIT = frozenset({
    ('_index_scores', (('ASM', True), ('BLOCK_HI', 64), ('BLOCK_S', 128), ('DI', 128), ('HEAD_MMA', True)), 4, 3),
    # 224 B of spills (the config at 8 warps fits)
    ('_index_fused', (('ASM', True), ('BLOCK_HI', 64), ('BLOCK_S', 64), ('DI', 128), ('HEAD_MMA', False), ('KP', 1024),
                      ('SCAN', 4096)),
     4, 3),   # 20 B of spills (impl triton_fused's packed head terms; unseen before: the job compiled without them)
    ('_index_topk_split', (('FAST', True), ('FILTER', 2048), ('KP', 512), ('ROWB', 16384), ('SCAN', 2048),
                           ('SEG_P2', 64)),
     8, 1),   # 100 B of spills
    ('_index_topk', (('FAST', True), ('KP', 512), ('ROWB', 16384), ('SCAN', 8192)),
     16, 1),   # 324 B of spills
    ('_index_topk_split', (('FAST', True), ('FILTER', 2048), ('KP', 512), ('ROWB', 16384), ('SCAN', 8192),
                           ('SEG_P2', 64)),
     16, 1),   # 600 B of spills
    ('_index_topk', (('FAST', True), ('KP', 512), ('RADIX', False), ('ROWB', 32768), ('ROWL', 1), ('SCAN', 8192),
                     ('STAGE_HELD', False), ('TAIL', 0), ('WINDOW', 512)),
     16, 1),   # 52 B of spills
    ('_index_topk_split', (('FAST', True), ('FILTER', 2048), ('KP', 1024), ('ROWB', 16384), ('SCAN', 2048),
                           ('SEG_P2', 64)),
     8, 1),   # 60 B of spills
    ('_index_topk_split', (('FAST', True), ('FILTER', 2048), ('KP', 1024), ('MERGE_HELD', True), ('RADIX', False),
                           ('ROWB', 4096), ('ROWL', 1), ('SCAN', 2048), ('SEG_P2', 4), ('STAGE_HELD', True),
                           ('TAIL', 256), ('WINDOW', 512)),
     8, 1),   # 16 B of spills
    ('_index_topk', (('FAST', True), ('KP', 1024), ('ROWB', 16384), ('SCAN', 8192)),
     16, 1),   # 324 B of spills
    ('_index_topk_split', (('FAST', True), ('FILTER', 2048), ('KP', 1024), ('ROWB', 16384), ('SCAN', 8192),
                           ('SEG_P2', 64)),
     16, 1),   # 644 B of spills
    ('_index_topk', (('FAST', True), ('KP', 1024), ('RADIX', False), ('ROWB', 32768), ('ROWL', 1), ('SCAN', 8192),
                     ('STAGE_HELD', False), ('TAIL', 0), ('WINDOW', 512)),
     16, 1),   # 32 B of spills
})


@pytest.mark.slow
def test_shipped_configs_fit_sm120_with_tensor_cores():
    seen, jobs = set(), []
    for c in K.indexer_configs({}) + [K.indexer_default({})]:
        # the score launch as a compiled run builds it: the head terms in bf16x2 PTX unless BF16X2 is off, their sum
        # on the tensor cores with HEAD_MMA
        opts = K.score_options(c, interpret=False)
        key = (c["BLOCK_S"], c["num_warps"], c["num_stages"], opts["ASM"], opts["HEAD_MMA"])
        if key in seen:
            continue
        seen.add(key)
        jobs.append({"module": "kernelbench.kernels.indexer", "kernel": "_index_scores", "signature": SCORES_SIG,
                     "constexprs": {"DI": 128, "BLOCK_HI": 64, "BLOCK_S": key[0], "DOT_UPCAST": False,
                                    "RNE_FIX": False, **opts},
                     "num_warps": key[1], "num_stages": key[2]})
    scans = sorted({(c["SCAN"], c["TOPK_WARPS"]) for c in K.indexer_configs({}) + [K.indexer_default({})]})
    for kp in (512, 1024):   # Flash and Pro top-k
        for scan, warps in scans:
            # the split top-k at every (KP, scan, warps) too: the default (KP 512, SCAN 4096, 16 warps) runs it on
            # long rows only, so the flash-tp8 inspection (ci/baseline) never launches it
            for kern, sig in (("_index_topk", TOPK_SIG), ("_index_topk_split", SPLIT_SIG)):
                jobs.append({"module": "kernelbench.kernels.indexer", "kernel": kern, "signature": sig,
                             "constexprs": {"KP": kp, "SCAN": scan, "FAST": True, "ROWB": HELD_ROWS,
                                            **({"SEG_P2": 64, "FILTER": K.split_filter(scan)}
                                               if kern == "_index_topk_split" else {})},
                             "num_warps": warps, "num_stages": 1})
            # the default "auto" at its largest block (a cache of up to 32768 entries: held-only, one block), and at
            # the decode step's 64K cache (16,400 entries: a 16384 block and a tail, the stage from the registers)
            for cap in (K.MAX_ROW_REGS, 16400):
                jobs.append({"module": "kernelbench.kernels.indexer", "kernel": "_index_topk", "signature": TOPK_SIG,
                             "constexprs": {"KP": kp, "SCAN": scan, "FAST": True,
                                            **K.held_plan(K.indexer_default({}), cap, False, warps)},
                             "num_warps": warps, "num_stages": 1})
            # the opt-in split top-k with held segments and merge (SPLIT_HELD) at 64K, 4 segments of SEG_MIN 1024
            held = K.split_held_plan({"ROW_REGS": "auto"}, 16400, 4, 1024, kp, warps)
            jobs.append({"module": "kernelbench.kernels.indexer", "kernel": "_index_topk_split", "signature": SPLIT_SIG,
                         "constexprs": {"KP": kp, "SCAN": scan, "FAST": True, "SEG_P2": 4,
                                        "FILTER": K.split_filter(scan), **held},
                         "num_warps": warps, "num_stages": 1})
    fused = {(c["BLOCK_S"], c["num_warps"], c["num_stages"]) for c in K.fused_configs({}) + [K.fused_default({})]}
    for bs, warps, stages in sorted(fused):   # one launch: the widest scan of the space, the Pro top-k (KP 1024)
        jobs.append({"module": "kernelbench.kernels.indexer", "kernel": "_index_fused", "signature": FUSED_SIG,
                     "constexprs": {"DI": 128, "BLOCK_HI": 64, "BLOCK_S": bs, "KP": 1024,
                                    "SCAN": max(c["SCAN"] for c in K.fused_configs({})), "DOT_UPCAST": False,
                                    "RNE_FIX": False, **K.score_options({}, interpret=False)},
                     "num_warps": warps, "num_stages": stages})
    for w in (1, 2, 4):
        jobs.append({"module": "kernelbench.kernels.indexer", "kernel": "_indexer_q_epilogue", "signature": QEPI_SIG,
                     "constexprs": {"R": 64, "RNE_FIX": False}, "num_warps": w, "num_stages": 1})
    for t in (1, 64):                                   # the fused indexer_q at its default configs (Flash TP8)
        c = K.indexer_q_default({"T": t, "Hi": 8, "Qr": 1024})
        jobs.append({"module": "kernelbench.kernels.indexer", "kernel": "_indexer_q_kernel",
                     "signature": {**QFUSED_SIG, "x_ptr": "*bf16" if t == 1 else "*fp8e4nv"},
                     "constexprs": {"R": 64, "KB_SPLIT": 8 // c["SPLIT"], "BM": c["BM"], "BN": c["BN"],
                                    "SPLIT": c["SPLIT"], "RB": 16, "QUANT": t == 1, "HW_CVT": True, "RNE_FIX": False,
                                    "DOT_UPCAST": False, "NB": int(c.get("NB", 1))},
                     "num_warps": c["num_warps"], "num_stages": c["num_stages"]})
    reps = compile_sm120(jobs)
    for job, rep in zip(jobs, reps):
        assert not sm120_problems(rep, job, SM120_KNOWN_UNFIT), (job["kernel"], job["constexprs"], rep)
        # the top-k kernels have no matrix product, nor indexer_q's one-token GEMV (BM 1: FMA by design, kernels/front.py)
        if job["kernel"] in ("_index_scores", "_index_fused", "_indexer_q_kernel") and job["constexprs"].get("BM") != 1:
            assert rep["mma"] > 0, ("no tensor-core mma in the sm_120 PTX", job["constexprs"])
    assert not stale_unfit(jobs, reps, SM120_KNOWN_UNFIT)


@pytest.mark.parametrize("row_regs", ["auto", 0])
def test_all_equal_scores_over_several_stage_steps_take_the_lowest_indices(row_regs):
    """Every score equal (each cached key the same vector): the stage ranks the equal keys across its steps (SCAN 32
    over 64 scores: the equal count carried from one step's packed scan into the next) and keeps indices 0..K-1."""
    gen = torch.Generator().manual_seed(5)
    qi, w = torch.randn(1, 2, 128, generator=gen).bfloat16(), torch.rand(1, 2, generator=gen).bfloat16() + 0.5
    keys = torch.randn(1, 1, 128, generator=gen).bfloat16().expand(1, 64, 128).contiguous()
    cfg = {**K.indexer_default({}), "BLOCK_S": 64, "SCAN": 32, "TOPK_WARPS": 4, "ROW_REGS": row_regs}
    idx, val = K.indexer_topk(qi, w, keys, torch.zeros(1, dtype=torch.int32), torch.tensor([255]), 8, config=cfg)
    assert idx[0].tolist() == list(range(8))
    assert torch.unique(val[0]).numel() == 1


def test_the_64k_default_fits_sm90_and_sm120_without_spills():
    """ci/baseline inspects the Flash TP8 shapes at 512 tokens, where the top-k holds no long row; at 64K tokens the
    default holds 16384 scores (+ a 512 tail at the decode step's 16,400-entry cache) in a 16-warp program at the
    128-register cap, and its stage from registers spilled 84-316 B (session 31). The whole default csa_indices
    launch pair, captured as the card would size it and compiled for both targets: no spills, shared memory within
    sm_120's limit."""
    from kernelbench.harness import inspector
    spec, impl = registry.get_op("csa_indices"), registry.get_impl("csa_indices", "triton")
    for cap in (16384, 16400):
        params = {"T": 64, "Hi": 64, "topk": 512, "ctx": 65536, "cap": cap, "ragged": False, "W": 128}
        for target in ("sm_90", "sm_120"):
            rep = inspector.inspect_jobs([("csa_indices", "triton", params, None)], target=target)[0]
            assert rep["problems"] == [], (cap, target, rep["problems"])
            assert {k["kernel"].split(":")[-1] for k in rep["kernels"]} == {"_index_scores", "_index_topk"}
            assert all(not k["spills"] for k in rep["kernels"]), (cap, target, rep["kernels"])
