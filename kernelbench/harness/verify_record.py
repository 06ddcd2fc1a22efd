"""Recording a verify run in the results database (db/schema.py: verify_run, verify_result).

    rec = Recorder(Store(url), opts, command="kernelbench verify ...")
    verify_pair(spec, impl, opts, on_result=rec.result)     # one committed row per example
    rec.finish("passed" | "failed" | "interrupted")
"""
from __future__ import annotations

from kernelbench import registry
from kernelbench.db.store import Store
from kernelbench.harness.fingerprint import fingerprint, git_commit
from kernelbench.harness.verify import Options
from kernelbench.harness.verify_check import ExampleResult


class Recorder:
    def __init__(self, store: Store, opts: Options, command: str = ""):
        self.store, self.opts = store, opts
        self.environment_id = store.environment_id(fingerprint(opts.device))
        self.run_id = store.start_verify_run(self.environment_id, profile=opts.profile, device=opts.device,
                                             shape_set=opts.shape_set or "", command=command,
                                             git_commit=git_commit())
        self._impl_ids: dict[tuple[str, str], int] = {}
        self._alive = store.keep_alive(self.run_id)      # heartbeats while the run lasts (db/store.py)
        self._alive.__enter__()

    def impl_id(self, op: str, impl: str) -> int:
        key = (op, impl)
        if key not in self._impl_ids:
            self._impl_ids[key] = self.store.impl_id(registry.get_impl(op, impl))
        return self._impl_ids[key]

    def result(self, r: ExampleResult) -> int:
        ex = r.example
        return self.store.add_verify_result(
            self.run_id, self.impl_id(ex.op, ex.impl), params=ex.params, value_mode=ex.values, seed=ex.seed,
            source=ex.source, layout=ex.layout, passed=r.passed,
            stats=r.stats, failure=r.failure, repro="" if r.passed else ex.repro(self.opts.device,
                                                                                self.opts.kernel_modules),
            elapsed_s=r.elapsed_s)

    def finish(self, status: str) -> None:
        self._alive.__exit__(None, None, None)
        self.store.finish_verify_run(self.run_id, status)
