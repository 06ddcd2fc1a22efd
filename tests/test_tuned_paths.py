"""Every entry of the shipped tuned table (kernelbench/tuned/v1.json) is a verify path of the impl it was tuned
for (verify_paths.select_paths: the entry's config over the default at the representative problem), and verify
runs each path on examples of every size its op's strategy draws, not only at the key the entry was tuned for. So
each path must compute its op at every "tiny" case of the op (one and several tokens): session 28 found
`kernelbench verify attention_front attention_q` failing on the CPU because their one-token entries (the BM 1 GEMV)
refused two tokens."""
import pytest
import torch

from kernelbench import registry
from kernelbench.harness.verify_check import Example, check_example
from kernelbench.harness.verify_paths import select_paths, with_config
from kernelbench.tuned_configs import entries
from _kernel_check import needs_triton

registry.load_builtin()
pytestmark = needs_triton


def _tuned_paths():
    out = []
    for op, name in sorted({(e["op"], e.get("impl", "triton")) for e in entries()}):   # the impls the table is for
        impl = registry.get_impl(op, name)
        if impl.configs is None or impl.default_config is None:
            continue
        for path in select_paths(impl)[1:]:
            if any(w.startswith("tuned for") for w in path.why) and not path.compiled_only:
                out.append(pytest.param(op, name, path.config, id=f"{op}-{name}-{len(out)}"))
    return out


TUNED = _tuned_paths()


def test_the_table_gives_paths():
    assert len({p.values[0] for p in TUNED}) >= 5, [p.values[:2] for p in TUNED]


@pytest.mark.parametrize("op,impl_name,config", TUNED)
def test_tuned_path_computes_its_op_at_every_tiny_case(op, impl_name, config):
    spec, impl = registry.get_op(op), registry.get_impl(op, impl_name)
    cimpl = with_config(impl, config)
    for params in spec.shape_cases("tiny"):
        r = check_example(spec, cimpl, Example(op, impl_name, dict(params), "normal", 0, "contiguous", "case"))
        assert r.passed, f"{op}/{impl_name} {config} at {params}: {r.failure}"
