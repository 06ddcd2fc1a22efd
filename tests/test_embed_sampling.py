"""embedding (vocab shard) and sample (greedy, Gumbel-max): shard sums, frequencies against the
softmax (seeded, with a bound that a correct sampler misses with probability < 1e-9), ties, kernels
vs reference in the interpreter, errors."""
import pytest
import torch

from kernelbench import registry
from kernelbench.reference.sampling import sample
from _kernel_check import needs_triton, verify_drawn

registry.load_builtin()
IMPLS = ["reference", pytest.param("triton", marks=needs_triton)]


# embedding ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("impl", IMPLS)
def test_shards_are_zero_outside_and_sum_to_the_full_lookup(impl):
    fn = registry.get_impl("embedding", impl).fn
    g = torch.Generator().manual_seed(0)
    v, d, tp = 24, 40, 4
    table = torch.randn(v, d, generator=g).bfloat16()
    ids = torch.tensor([0, 5, 6, 23, 17, 11, 12, 5])
    vl = v // tp
    parts = [fn(ids=ids, weight=table[r * vl:(r + 1) * vl], vocab_start=r * vl) for r in range(tp)]
    for r, part in enumerate(parts):
        inside = (ids >= r * vl) & (ids < (r + 1) * vl)
        assert torch.equal(part[~inside], torch.zeros_like(part[~inside]))
        assert torch.equal(part[inside], table[ids[inside]])
    assert torch.equal(sum(p.float() for p in parts).bfloat16(), table[ids])


# sampling ----------------------------------------------------------------------------------------
def test_greedy_is_argmax_with_lowest_index_on_ties():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(6, 50, generator=g)
    logits[2] = 1.0                                     # all tied -> index 0
    logits[3, [7, 9]] = 100.0                           # tie at the top -> 7
    noise = torch.empty(6, 50).exponential_(generator=g)
    ids = sample(logits, torch.zeros(6), noise)
    assert torch.equal(ids, logits.argmax(-1))
    assert ids[2] == 0 and ids[3] == 7


def _chi2(counts: torch.Tensor, probs: torch.Tensor) -> float:
    n = counts.sum()
    return float(((counts - n * probs) ** 2 / (n * probs)).sum())


@pytest.mark.parametrize("temp", [1.0, 0.5, 2.0])
def test_gumbel_max_frequencies_match_the_softmax(temp):
    # 8 categories, 40000 draws. Chi-square with 7 degrees of freedom exceeds 60 with probability
    # ~4e-10 for a correct sampler (the seed is fixed, so the test is deterministic anyway); a
    # sampler that ignored the temperature, or used p * noise, gives chi2 in the thousands.
    logits = torch.tensor([0.0, 1.0, -1.0, 2.0, 0.5, -2.0, 1.5, 0.2])
    n = 40000
    g = torch.Generator().manual_seed(2)
    noise = torch.empty(n, 8).exponential_(generator=g)
    ids = sample(logits.expand(n, 8).contiguous(), torch.full((n,), temp), noise)
    counts = torch.bincount(ids, minlength=8).double()
    assert _chi2(counts, torch.softmax(logits.double() / temp, 0)) < 60
    wrong = torch.softmax(logits.double(), 0) if temp != 1.0 else torch.full((8,), 1 / 8, dtype=torch.float64)
    assert _chi2(counts, wrong) > 200                   # the check has power


@needs_triton
def test_kernel_draws_the_same_tokens_as_the_reference():
    g = torch.Generator().manual_seed(3)
    n, v = 120, 3000
    logits = torch.randn(n, v, generator=g) * 3
    temp = torch.rand(n, generator=g) + 0.3
    temp[::3] = 0.0
    noise = torch.empty(n, v).exponential_(generator=g)
    got = registry.get_impl("sample", "triton").fn(logits=logits, temperature=temp, noise=noise,
                                                   config={"BLOCK_V": 1024, "STEPS": 1, "num_warps": 4})
    assert torch.equal(got, sample(logits, temp, noise))


# kernels vs reference ------------------------------------------------------------------------------
@needs_triton
@pytest.mark.parametrize("op", ["embedding", "sample"])
def test_kernel_matches_reference(op):
    verify_drawn(op)


# errors --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("impl", IMPLS)
def test_bad_input_is_a_clear_error(impl):
    emb = registry.get_impl("embedding", impl).fn
    w = torch.ones(4, 8, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="ids"):
        emb(ids=torch.zeros(2, 2, dtype=torch.int64), weight=w, vocab_start=0)
    with pytest.raises(ValueError, match="vocab_start"):
        emb(ids=torch.zeros(2, dtype=torch.int64), weight=w, vocab_start=-1)
    smp = registry.get_impl("sample", impl).fn
    logits = torch.zeros(2, 5)
    with pytest.raises(ValueError, match="noise"):
        smp(logits=logits, temperature=torch.zeros(2), noise=torch.ones(2, 4))
    with pytest.raises(ValueError, match="temperature"):
        smp(logits=logits, temperature=torch.zeros(3), noise=torch.ones(2, 5))


# sm_120 ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("all_configs", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_sm120_compile_fits_without_spills(all_configs):
    from kernelbench.harness import inspector
    reps = inspector.inspect_impls(["embedding", "sample"], shape_set="flash-tp8", target="sm_120", batches=(64,),
                                   all_configs=all_configs)
    assert {r["op"] for r in reps} == {"embedding", "sample"}
    for rep in reps:
        assert rep["problems"] == [], (rep["label"], rep["config"], rep["problems"])
