"""sm_120 / sm_90 compile of moe_routed (a TP8 rank's shared slice) and moe_layer (the whole shared expert) at their
defaults for T = 8 and 12, token counts the flash-tp8 shape set has no case for (`kernelbench inspect --batch` only
picks the set's cases): since session 17 the shared expert runs on the op's side stream there (SHARED_SIDE_MIN_T 8).
One line per (op, T, target): each kernel's (name, registers, spill bytes, shared bytes, tensor cores), the
problems against each target's shared-memory limit (kernelbench.harness.inspector SMEM_LIMIT).

    python3 scripts/inspect_side_threshold.py"""
from kernelbench import registry
from kernelbench.harness import inspector as I
registry.load_builtin()
base = {'D': 4096, 'E': 256, 'El': 32, 'offset': 96, 'F': 2048, 'K': 6, 'V': 8192, 'hash': False, 'rs': 1.5}
cache = {}
for op, extra in (("moe_routed", {'shared': True, 'Fs': 256}), ("moe_layer", {})):
    spec, impl = registry.get_op(op), registry.get_impl(op, "triton")
    for t in (8, 12):
        p = {**base, **extra, "T": t}
        if op == "moe_layer":
            p = {k: v for k, v in p.items() if k in dict(spec.shape_cases("flash-tp8")[0]) or k == "T"}
        cfg = impl.default_config(p)
        for target in ("sm_120", "sm_90"):
            rep = I.inspect_impl(spec, impl, p, None, target, cache)
            probs = rep.problems(I.SMEM_LIMIT[I.TARGETS[target]])
            print(op, t, target, "SHARED", cfg.get("SHARED"), "error", rep.error,
                  [(k.kernel[:26], k.registers, k.spill_bytes, k.shared_bytes, k.tensor_cores) for k in rep.kernels], "problems", probs)
