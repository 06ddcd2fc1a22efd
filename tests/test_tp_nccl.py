"""scripts/tp_nccl.py (kernelbench/decoder/tp_nccl.py) on the CPU: the whole script under torchrun at nproc 2 with
gloo (checkpoint, TP2 vs TP1 check, decode bench with and without collectives, TP1 bench, database,
report), the in-place weights' loader checks, the check's verdicts, the collective rows, the one-line
argument errors and the multicast-off environment."""
import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from kernelbench.decoder import checkpoint as ck
from kernelbench.decoder import decode_bench as db
from kernelbench.decoder import tp_nccl as tn
from kernelbench.decoder.model import Transformer
from kernelbench.decoder.tp import TPContext

ROOT = Path(__file__).resolve().parents[1]


# ---- the multicast-off environment -------------------------------------------------------------
def test_safe_env_is_set_and_a_conflicting_value_refused():
    env = {}
    assert tn.enforce_safe_env(env) == tn.SAFE_ENV and env == tn.SAFE_ENV
    assert tn.enforce_safe_env(dict(tn.SAFE_ENV)) == tn.SAFE_ENV           # already right: accepted
    for k in tn.SAFE_ENV:
        bad = {k: "1" if tn.SAFE_ENV[k] == "0" else "0"}
        with pytest.raises(tn.TPRunError, match=f"multicast must stay off: found {k}=") as e:
            tn.enforce_safe_env(bad)
        assert "\n" not in str(e.value) and bad[k] != tn.SAFE_ENV[k]          # left as found, not overwritten


def _main(monkeypatch, capsys, argv, world=1, **env):
    for k in tn.SAFE_ENV:
        monkeypatch.delenv(k, raising=False)
    for k in ("MASTER_ADDR", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("WORLD_SIZE", str(world))
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    rc = tn.main(["--device", "cpu", "--config", "tiny", "--no-store", *argv])
    return rc, capsys.readouterr().err


@pytest.mark.parametrize("argv,world,why", [
    (["--check-layers", "swa"], 3, "TP3: tiny-swa: n_heads=4 is not divisible by TP=3"),
    (["--check-layers", "swa"], 4, "o_groups=2 is not divisible by TP=4"),
    (["--check-layers", "swa", "--bench-layers", "swa,mla"], 2, "--layers"),
    (["--batches", "1,x"], 2, "--batches"),
    (["--context", "0"], 2, "--context"),
    (["--impl", "nosuch"], 2, "--impl nosuch"),
    (["--tokens", "3"], 2, "--tokens"),
])
def test_bad_arguments_are_one_line_before_any_process_group(monkeypatch, capsys, argv, world, why):
    rc, err = _main(monkeypatch, capsys, argv, world)
    assert rc == 2 and why in err and err.count("\n") == 1 and err.startswith("tp_nccl.py: error:"), err
    assert not torch.distributed.is_initialized()


def test_a_conflicting_multicast_setting_stops_the_script(monkeypatch, capsys):
    rc, err = _main(monkeypatch, capsys, ["--check-layers", "swa"], 1, NCCL_NVLS_ENABLE="1")
    assert rc == 2 and "NCCL_NVLS_ENABLE=1" in err and err.count("\n") == 1


def test_world_2_without_torchrun_is_refused(monkeypatch, capsys):
    rc, err = _main(monkeypatch, capsys, ["--check-layers", "swa"], 2)
    assert rc == 2 and "start the script with torchrun" in err


# ---- in-place weights ----------------------------------------------------------------------------
def test_in_place_state_passes_the_loader_checks_and_errors_name_the_tensor():
    cfg = db.bench_config("tiny", "swa,csa")
    sd = tn.generate_in_place(cfg, TPContext(rank=1, world=2), seed=3, device="cpu")
    loaded_names = {n for n, s in ck.param_specs(cfg).items() if ck.is_local(s, cfg, 1, 2)}
    assert set(sd) == loaded_names
    assert sd["layers.0.attn.wq_b.weight"].shape[0] == cfg.n_heads * cfg.head_dim // 2
    name = "layers.1.attn.wo_b.weight"
    cases = [({k: v for k, v in sd.items() if k != name}, f"tensor {name} is missing"),
             ({**sd, name: sd[name].view(torch.uint8)}, f"tensor {name} has dtype torch.uint8"),
             ({**sd, name: sd[name][:, :-1]}, f"tensor {name} has shape"),
             ({**sd, "layers.0.ffn.experts.0.w1.weight": sd["layers.0.ffn.experts.8.w1.weight"]},
              "tensor layers.0.ffn.experts.0.w1.weight does not belong to rank 1 of TP2")]
    for bad, why in cases:
        with pytest.raises(ck.CheckpointError, match=why):
            tn.check_local_state(cfg, bad, 1, 2)


# ---- the check's verdict -----------------------------------------------------------------------
def test_the_check_fails_without_the_collectives(tmp_path):
    """Rank 0 of TP2 with its collectives skipped (what a missing all-reduce would compute) is far
    from TP1; TP1 against itself passes."""
    cfg = db.bench_config("tiny", "swa,csa")
    path = ck.write_random(tmp_path / "c", cfg, seed=2)
    ref = tn.probe(Transformer.from_checkpoint(path), n_tok=12)
    assert tn.compare(ref, ref, 1).passed
    broken = tn.probe(Transformer.from_checkpoint(path, tp=TPContext(rank=0, world=2, simulate=True)), n_tok=12)
    a = tn.compare(broken, ref, 2)
    assert not a.passed and any(f.startswith("attn0") for f in a.failures)
    assert a.sublayers["attn0"] > 0.3
    assert any(f.startswith("logits: shape (21, 512), TP1 (21, 1024)") for f in a.failures)
    cut = {**ref, "logits": ref["logits"].roll(1, dims=-1)}                # a misplaced vocabulary shard
    b = tn.compare(cut, ref, 2)
    assert not b.passed and b.logits_median > tn.TOL_LOGITS_MEDIAN and b.argmax_agreement < 0.1
    assert not tn.compare(ref, ref, 2, ranks_identical=False).passed
    moe = [k for k in ref if k.startswith("moe")]         # the shared expert split over the ranks: bf16 parts
    assert moe and {tn.compare(ref, ref, 2).tolerances[k] for k in moe} == {tn.TOL_MOE_REFERENCE}
    assert {tn.compare(ref, ref, 2, split_shared=True).tolerances[k] for k in moe} == {tn.TOL_ATTN}


def test_collective_rows_from_the_attribution_and_the_collectives_off_run():
    def res(step_ms, rows):
        r = db.BenchResult("c", "triton", "cuda:0", 2, False, "512", 600, True)
        r.points = [db.BenchPoint(c, 512, ms, ms, ms, ms, ms, 1e3 * c / ms, attribution=rows) for c, ms in step_ms]
        return r
    att = [{"op": "all_reduce", "calls": 5, "gpu_ms": 0.5, "bytes": 0}, {"op": "all_gather", "calls": 1,
           "gpu_ms": 0.1, "bytes": 0}, {"op": "fp8_linear", "calls": 8, "gpu_ms": 2.0, "bytes": 0}]
    rows = tn.collective_rows(res([(1, 4.0), (16, 5.0)], att), res([(1, 3.0), (16, 4.5)], []))
    assert [r["C"] for r in rows] == [1, 16]
    assert rows[0]["collectives_ms"] == pytest.approx(1.0) and rows[0]["collective_share"] == pytest.approx(0.25)
    assert rows[1]["no_collectives_ms"] == 4.5 and rows[1]["collective_kernel_ms"] == pytest.approx(0.6)
    assert rows[0]["collective_calls"] == 6 and rows[1]["collective_kernel_share"] == pytest.approx(0.12)
    alone = tn.collective_rows(res([(1, 4.0)], []), None)[0]
    assert math.isnan(alone["no_collectives_ms"]) and math.isnan(alone["collective_kernel_ms"])


def test_run_context_collectives_at_world_1_only_with_a_group():
    assert not tn.RunContext().active and tn.RunContext(always=True).active
    assert not tn.RunContext(always=True, simulate=True).active and tn.RunContext(rank=1, world=2).active


# ---- the script, end to end, under torchrun with gloo --------------------------------------------
def _torchrun(tmp_path, nproc: int, *args: str) -> tuple[Path, str, dict]:
    """The script under torchrun -> (out dir, database URL, tp_nccl.json) after asserting it exited 0."""
    out, url = tmp_path / "out", f"sqlite:///{tmp_path / 'kb.sqlite'}"
    env = {k: v for k, v in os.environ.items() if k not in tn.SAFE_ENV and k not in ("RANK", "WORLD_SIZE")}
    env.update(OMP_NUM_THREADS="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           str(ROOT / "scripts" / "tp_nccl.py"), "--config", "tiny", "--checkpoint", str(tmp_path / "ckpt"),
           "--out", str(out), "--db", url, *args]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    return out, url, json.loads((out / "tp_nccl.json").read_text())


def test_script_under_torchrun_nproc_2_gloo(tmp_path):
    out, _, res = _torchrun(tmp_path, 2, "--device", "cpu", "--check-layers", "swa,csa", "--bench-layers", "swa,csa",
                              "--mtp", "--tp1", "on", "--tokens", "10", "--batches", "1,2", "--context", "16",
                              "--ragged", "4:24")
    assert res["env"] == tn.SAFE_ENV and res["world"] == 2
    a = res["agreement"]
    assert a["passed"] and a["ranks_identical"] and set(a["sublayers"]) == {"attn0", "moe0", "attn1", "moe1"}
    assert res["plan"]["in_place"] and (tmp_path / "ckpt" / ck.INDEX_FILE).exists()
    real, off, tp1 = res["bench"]["real"], res["bench"]["off"], res["bench"]["tp1"]
    assert len(real) == len(off) == len(tp1) == 2                       # context 16 and the ragged mix
    assert [r["tp"] for r in real + off + tp1] == [2, 2, 2, 2, 1, 1] and real[0]["mtp"]
    assert not real[0]["simulated_tp"] and off[0]["simulated_tp"]
    ragged = [p["context"] for p in real[1]["points"]]
    assert len(set(ragged)) == 2 and all(4 <= c <= 24 for c in ragged)
    for row in res["collectives"]["ctx0"]:
        # per step: 2 embeddings (main, MTP), 3 blocks (2 + MTP) x (attention + MoE) all-reduce; 2 heads gather
        assert row["collective_calls"] == 2 + 3 * 2 + 2 and row["collective_kernel_ms"] > 0
        assert row["step_ms"] > 0 and row["no_collectives_ms"] > 0
    ops = {x["op"]: x for x in real[0]["points"][0]["attribution"]}
    assert ops["all_reduce"]["calls"] == 8 and ops["all_gather"]["calls"] == 2
    con = sqlite3.connect(tmp_path / "kb.sqlite")
    tags = {t for (t,) in con.execute("select distinct run_tag from bench_result")}
    assert {t.split(":")[0] for t in tags} == {"tp2", "tp2-nocoll", "tp1"} and len(tags) == 6
    assert con.execute("select status, n_results, n_failed from verify_run where profile='tp'").fetchall() == [
        ("passed", 5, 0)]
    page = (out / "tp_nccl.md").read_text()
    assert "TP2 vs TP1" in page and "PASS" in page and "no-collective ms" in page and "## Decode step" in page


@pytest.mark.gpu
def test_gpu_nccl_world_1_collectives_inside_the_graph(tmp_path):
    """One GPU under torchrun: an NCCL group at world 1, the collectives captured in the CUDA graph and
    attributed from the graph-replay kernels; the check passes."""
    _, _, res = _torchrun(tmp_path, 1, "--device", "cuda", "--impl", "triton", "--check-layers", "swa",
                          "--tokens", "8", "--batches", "1,4", "--steps", "3", "--warmup", "1", "--context", "64")
    assert res["agreement"]["passed"] and res["device"].startswith("cuda")
    real, off = res["bench"]["real"][0], res["bench"]["off"][0]
    assert real["graph"] and not real["graph_error"] and off["graph"] and not off["graph_error"]
    for p in real["points"]:
        # The graph-replay labelling is refused (eager kernels, with the reason) when the replayed kernel
        # sequence differs from the eager step's: seen on the H200 at world 1, where NCCL's in-place
        # all-reduce runs other kernels in the graph than eagerly (docs/perf/tp_nccl.md). Either way the
        # collectives must be attributed.
        assert p["attribution_source"] in ("graph replay kernels", "eager kernels"), p["attribution_note"]
        assert p["attribution_source"] == "graph replay kernels" or p["attribution_note"]
        ops = {a["op"]: a for a in p["attribution"]}
        assert ops["all_reduce"]["calls"] == 2 and ops["all_gather"]["calls"] == 1      # embedding, attention; head
    assert all(r["no_collectives_ms"] > 0 for r in res["collectives"]["ctx0"])
