"""The registry sweep (STYLE.md item 7): verify every registered (op, implementation) pair on the CPU
(Triton kernels in the interpreter) with a few derandomized examples at the strategies' small
shapes (PATH_EXAMPLES on each config path of impl triton, verify_paths.py), plus one 'large'-values example at
the shape of the pair's first drawn example; one test item per op. It fails if an
enabled implementation produced no result, or if one failed verification without being listed below.
Skips, known failures and the pairs swept only with KB_SLOW=1 (old versions kept for comparison, verified
by fast tests in their family's file) live here, each with its reason.
"""
from __future__ import annotations

import dataclasses
import os

import pytest

from kernelbench import registry
from kernelbench.harness.verify import Options, interpreter_active, select_pairs, verify_pair
from kernelbench.harness.verify_check import Example, check_example

# (op, impl) -> why it is not run on the CPU at all
SKIPS: dict[tuple[str, str], str] = {
    (op, "triton_kernels"): "the triton_kernels peer (kernels/peers.py, only with KERNELBENCH_TRITON_KERNELS) needs a GPU"
    for op in ("moe_experts", "moe_layer")}

# (op, impl) -> the fast tests that verify this kept-for-comparison version against the reference in its
# family's file; the sweep runs these pairs only with KB_SLOW=1 (CI time: together ~30% of the sweep's CPU time,
# 2026-12-01). An entry whose pair is no longer registered fails the sweep (stale).
SLOW_PAIRS: dict[tuple[str, str], str] = {
    ("moe_experts", "triton_v1"): "tests/test_moe.py::test_experts_kernel_v1_decode_paths (both weight decodes, "
                                  "several token tiles per expert) and ::test_experts_kernel_with_shared[triton_v1-cfg2]",
    ("indexer_topk", "triton_v1"): "tests/test_indexer.py::test_kernel_exact_on_exact_scores[*-False] (FAST=False "
                                   "is triton_v1's kernel path: bit-exact at top-k 5, 16, 64, with ties, 1 and 3 segments)",
    # kept beside the session-4 kernels for same-run timing (added 2026-12-01, session 4; CI time)
    **{(op, glue): "tests/test_moe.py::test_previous_glue_impls_match_the_reference (both ops, both glues, outliers "
                   "values, the shared expert) and ::test_moe_layer_is_cuda_graph_capturable (triton_glue3, GPU)"
       for op in ("moe_experts", "moe_layer") for glue in ("triton_glue2", "triton_glue3")},
    **{(op, "triton_v2"): "tests/test_moe.py::test_grouped_schedule_choices_keep_the_arithmetic (impl triton's "
                          "outputs equal triton_v2's bit for bit, split K and the shared expert included)"
       for op in ("moe_experts", "moe_layer")},
    **{(op, "triton_v3"): "tests/test_mhc.py::test_v3_kernel_config_variants (every op's configs against the reference "
                          "at T 17, D 768) and ::test_v3_one_launch_tickets_are_rearmed_and_the_result_is_deterministic"
       for op in ("mhc_pre", "mhc_post_pre", "mhc_post_pre_norm", "mhc_head")},
    **{(op, "triton_v2"): "tests/test_mhc.py::test_kernel_config_variants (every op at T 17, D 768, streams as a grid "
                          "axis, 3 partial chunks, both norm forms) and ::test_default_between_5_and_16_tokens_is_the_"
                          "previous_pair (impl triton's default there)"
       for op in ("mhc_pre", "mhc_post_pre", "mhc_post_pre_norm")},
    ("sparse_attention", "triton_fused"): "tests/test_attention.py::test_one_launch_join_matches_two_launch_and_"
                                          "reference (no split, 17 splits, 8 warps, prefetch; ragged, rope, lengths)",
    ("indexer_topk", "triton_fused"): "tests/test_indexer.py::test_kernel_exact_on_exact_scores[*-0-*] (segments 0 is "
                                      "triton_fused: bit-exact with ties) and ::test_w_scale_inside_the_op_equals_the_"
                                      "scaled_weights[triton_fused]",
    ("sparse_attention_wo_a", "triton_parts"): "tests/test_attention.py::test_wo_a_join_equals_the_two_ops_and_the_"
                                               "reference (the two ops composed, against the reference and the join)",
    # impl triton's code on the bf16 wo_a (no prepare), kept for same-run timing (session 53)
    **{(op, "triton_bf16"): "tests/test_wo_a_fp8.py (impl triton on the FP8 codes equals triton_bf16 on the bf16 "
                            "weight bit for bit, both against the reference)"
       for op in ("grouped_wo_a", "sparse_attention_wo_a")},
    ("csa_indices", "triton_parts"): "tests/test_indexer.py::test_csa_indices_write_the_attention_rows_from_the_top_k "
                                     "(the two ops composed: equal to the reference bit for bit, ties, 1 and 3 segments)",
    ("moe_routed", "triton_parts"): "tests/test_moe.py::test_routed_op_equals_gate_then_experts_bit_for_bit (impl "
                                    "triton's outputs equal triton_parts' bit for bit, the shared expert and hash "
                                    "routing included; both against the reference)",
    # the packed caches' readers (sessions 54 / 55): impl triton's code on another storage form of the same values,
    # not the decoder's default (CI time: 33 s of the sweep's CPU, session 56; tests/test_sm120.py then leaves them
    # to their files' sm_120 tests at the 64-token case, test_fp8_cache_space_fits_sm120 / test_fp4_keys_space_fits_sm120)
    ("sparse_attention", "triton_fp8kv"): "tests/test_fp8_kv.py::test_fp8_cache_is_bit_equal_to_the_bf16_cache (against "
                                          "the reference on poisoned outputs and equal to impl triton at the same "
                                          "config: the default and 64 waves of splits, ragged and rope cases)",
    **{(op, "triton_fp4keys"): "tests/test_fp4_keys.py::test_fp4_keys_are_bit_equal_to_the_bf16_keys (against the "
                               "reference on poisoned outputs and equal to impl triton at the same config: the "
                               "default and many score programs with the split top-k)"
       for op in ("indexer_topk", "csa_indices")},
    ("compressor_step", "triton_v2"): "tests/test_compressor.py::test_one_launch_equals_three (impl triton bit-equal "
                                      "to triton_v2, ratios 4 and 128, rotate, D split) and the KB_SLOW cases",
    # the earlier MoE defaults kept for same-run timing (session 11: CI time, the MoE pairs are the sweep's slowest)
    **{pair: "tests/test_moe.py::test_previous_choices_stay_registered (against the reference at T = 2, where the "
             "defaults differ)"
       for pair in (("moe_gate", "triton_v1"), ("moe_layer", "triton_v3"), ("moe_experts", "triton_v3"),
                    ("moe_layer", "triton_v4"), ("moe_experts", "triton_v4"))},
    **{pair: "tests/test_moe.py::test_previous_choices_stay_registered (moe_layer against the reference at T = 16, "
             "where the defaults differ: the shared expert inside the routed launches vs on the side lane; "
             "moe_experts' shared expert is optional and its kernels are moe_layer's)"
       for pair in (("moe_layer", "triton_v5"), ("moe_experts", "triton_v5"))},
}

# (op, impl) -> the open bug verify finds; the sweep reports it but does not fail on it. An entry that
# passes fails the sweep (stale). History: the MoE kernels' strided-input bug found here on 2026-11-29
# was fixed the same day (inputs made contiguous) and its entries removed.
KNOWN_FAILURES: dict[tuple[str, str], str] = {}

EXAMPLES = 2


EXTRA_VALUE_MODES = ("large",)   # one example each (every mode: 4x the sweep's time)


def _extra_value_modes(spec, impl, params: dict | None = None):
    """The two derandomized hypothesis examples draw 'normal' values; a tolerance that only 'large'
    values break (issue 10, item 1: fp32 accumulation error on cancelled elements) must fail CI too.
    `params`: the pair's first drawn (derandomized) example; else the strategy's minimal example
    (a hypothesis search: 1-4 s per op, which over every pair was a fifth of the sweep's time)."""
    from kernelbench.usage import smallest_params
    modes = [m for m in EXTRA_VALUE_MODES if m in spec.value_modes]
    if modes and params is None:
        params = dict(smallest_params(spec.name))
    for mode in modes:
        yield check_example(spec, impl, Example(spec.name, impl.name, dict(params), mode, 0, "contiguous", "case"))


def _in_package(fn) -> bool:
    return getattr(fn, "__module__", "").split(".")[0] == "kernelbench"


def test_in_package_tells_project_functions_from_user_modules():
    registry.load_builtin()
    assert _in_package(registry.get_impl("mhc_pre", "triton").fn)
    user = type("F", (), {"__module__": "kernelbench_user_kb_toy_0123abcd"})()
    assert not _in_package(user)
    assert not _in_package(type("F", (), {"__module__": "tests.kb_toy"})())


INTERPRETED = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1",
                                 reason="run with TRITON_INTERPRET=1 (tests/README)")
SHIPPED_IMPL = "triton"      # the decoder's implementation: its config paths get PATH_EXAMPLES each
PATH_EXAMPLES = 3            # as `kernelbench verify --profile ci` (12 examples // 4): session 28's CPU verify found a
# one-token tuned entry refusing two tokens (attention_front / attention_q) and a split top-k path leaving a short
# row's list unwritten (csa_indices) on a path's 2nd example; the sweep's one example a path had passed both


def _registered():
    """The project's (spec, impl) pairs (functions of the kernelbench package): under pytest-xdist a worker may
    already have run a test that registered implementations of its own, e.g. tests/test_tune.py's on the toy op of
    tests/kb_toy.py (loaded as module "kernelbench_user_kb_toy_<hash>"), whose planted "crash" config aborts the
    process by design."""
    registry.load_builtin()
    return [(s, i) for s, i in select_pairs() if _in_package(i.fn)]


def _op_names() -> list[str]:
    registry.load_builtin()
    return sorted(s.name for s in registry.ops())


def test_sweep_lists_name_registered_pairs():
    registered = {(s.name, i.name) for s, i in _registered()}
    stale = sorted((set(SLOW_PAIRS) | set(KNOWN_FAILURES)) - registered)   # SKIPS: the peer registers on demand
    assert not stale, f"SLOW_PAIRS / KNOWN_FAILURES name pairs that are not registered: {stale}"
    specless = sorted(set(registry._IMPLS) - {s.name for s in registry.ops()})
    assert not specless, f"implementations registered for ops without an OpSpec (verify cannot see them): {specless}"


@INTERPRETED
@pytest.mark.parametrize("op", _op_names())
def test_every_registered_implementation_verifies(op):
    """One op's pairs (one test item per op, so pytest-xdist spreads the sweep over the workers)."""
    assert interpreter_active(), "kernelbench.kernels was imported before TRITON_INTERPRET=1 was set"
    slow_ok = os.environ.get("KB_SLOW") == "1"
    pairs = [(s, i) for s, i in _registered() if s.name == op and (s.name, i.name) not in SKIPS
             and (slow_ok or (s.name, i.name) not in SLOW_PAIRS)]
    assert pairs, f"{op}: no implementation to sweep"
    # the explicit-default check runs per op in tests/test_explicit_default.py (impl triton), not for every old impl
    opts = Options(device="cpu", examples=EXAMPLES, profile="ci", shrink_seconds=10, time_budget_s=30,
                   explicit_default=False)
    no_result, failed, known = [], [], []
    for spec, impl in pairs:
        drawn = []
        popts = dataclasses.replace(opts, path_examples=PATH_EXAMPLES) if impl.name == SHIPPED_IMPL else opts
        rep = verify_pair(spec, impl, popts, lambda r, drawn=drawn: drawn.append(r.example.params)
                          if r.example.source == "hypothesis" and r.example.config is None else None)
        if not rep.skipped:
            for r in _extra_value_modes(spec, impl, dict(drawn[0]) if drawn else None):
                rep.add(r)
        if rep.skipped or rep.n == 0:
            no_result.append(f"{spec.name}/{impl.name}: {rep.skipped or 'no example ran'}")
        elif rep.failed:
            line = (f"{spec.name}/{impl.name}: {rep.failures[0].short()}\n"
                    f"    reproduce: {rep.failures[0].example.repro('cpu')}")
            (known if (spec.name, impl.name) in KNOWN_FAILURES else failed).append(line)
        elif (spec.name, impl.name) in KNOWN_FAILURES:
            failed.append(f"{spec.name}/{impl.name} passes now: remove it from KNOWN_FAILURES")
    for line in known:
        print("known failure:", line)
    problems = [f"produced no result: {x}" for x in no_result] + [f"failed: {x}" for x in failed]
    assert not problems, "\n".join(problems)
