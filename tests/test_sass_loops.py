"""Global loads inside loops, read from SASS (kernelbench/harness/sass_loops.py): on a hand-written loop, and on the
fp8_linear K loop whose scale byte session 35's Nsight caught waiting (its default against PREFETCH "staged")."""
from kernelbench.harness import inspector, sass_loops

LOOP = """
        /*0100*/                   MOV R1, RZ ;
        /*0110*/                   LDG.E R2, desc[UR4][R10.64] ;
        /*0120*/                   LDG.E.64 R4, desc[UR4][R12.64] ;
        /*0130*/                   LDGSTS.E.BYPASS.128 [R3], desc[UR4][R14.64] ;
        /*0140*/                   LDG.E.U8 R6, desc[UR4][R16.64] ;
        /*0150*/                   FADD R7, R2, R1 ;
        /*0160*/                   FMUL R8, R7, R7 ;
        /*0170*/                   IMAD.MOV.U32 R9, RZ, RZ, R5 ;
        /*0180*/                   LDG.E R20, desc[UR4][R18.64] ;
        /*0190*/                   MOV R20, RZ ;
        /*01a0*/               @P0 BRA 0x110 ;
        /*01b0*/                   STG.E desc[UR4][R22.64], R6 ;
        /*01c0*/                   EXIT ;
"""
AHEAD = """
        /*0200*/                   FADD R7, R2, R1 ;
        /*0210*/                   FMUL R8, R7, R7 ;
        /*0220*/                   LDG.E R2, desc[UR4][R10.64] ;
        /*0230*/               @P0 BRA 0x200 ;
"""


def test_loads_in_a_loop_are_read_in_step_or_a_step_ahead():
    """In the loop 0x110-0x1a0: R2 read 4 instructions after its load (in step), the .64 load's second register R5
    read by a copy 5 later (a copy waits too), the byte into R6 read only after the loop (no reader in it), R20
    overwritten before any read; the LDGSTS is pipelined, not a plain load; the MOV before the loop is outside it.
    A load whose reader comes before it in the body is read in the next iteration: the search wraps, a step ahead."""
    found = {ld.addr: ld for ld in sass_loops.loop_loads(LOOP)}
    assert sorted(found) == [0x110, 0x120, 0x140, 0x180]
    assert (found[0x110].distance, found[0x110].ahead) == (4, False)
    assert (found[0x120].distance, found[0x120].ahead) == (5, False)
    assert found[0x140].distance is None and found[0x180].distance is None
    assert sass_loops.summary(list(found.values())) == {
        "in_step": [["0x0110", "LDG.E", 4], ["0x0120", "LDG.E.64", 5]], "ahead": 0}
    ahead = sass_loops.loop_loads(AHEAD)
    assert [(ld.addr, ld.distance, ld.ahead) for ld in ahead] == [(0x220, 2, True)]
    assert sass_loops.summary(ahead) == {"in_step": [], "ahead": 1}


def test_the_staged_fp8_loop_reads_its_scale_a_step_ahead():
    """fp8_linear's v2 K loop compiled for sm_90 (the 8 MB key's tuned tile, at a small K): the default loads the
    weight-scale byte in its step (an in-step LDG.E.U8), PREFETCH "staged" a step ahead (none in step, at least one
    ahead); both compiled, not run (the inspector's subprocess when the interpreter is on)."""
    tile = {"BM": 32, "BN": 128, "NB": 1, "PATH": "v2", "SPLIT": 1, "X_OPERAND": "B", "num_stages": 3,
            "num_warps": 8}
    params = {"M": 64, "N": 256, "K": 1024}
    jobs = [("fp8_linear", "triton", params, tile), ("fp8_linear", "triton", params, {**tile, "PREFETCH": "staged"})]
    default, staged = (r["kernels"][0]["loop_loads"] for r in inspector.inspect_jobs(jobs, target="sm_90"))
    assert any(op == "LDG.E.U8" for _, op, _ in default["in_step"])
    assert not any(op == "LDG.E.U8" for _, op, _ in staged["in_step"]) and staged["ahead"] >= 1


def test_inspect_lists_the_loop_loads_on_request(tmp_path):
    """`kernelbench inspect --loop-loads`: a second table (rows only for kernels with loads in loops: the tiny
    shapes' one-block K loops have none), and `loop_loads` per kernel in the JSON either way."""
    import json

    from click.testing import CliRunner

    from kernelbench.cli import main
    out = tmp_path / "insp.json"
    args = ["inspect", "fp8_linear", "--impl", "triton", "--shapes", "tiny", "--batch", "3", "--target", "sm_90",
            "--json", str(out)]
    r = CliRunner().invoke(main, args + ["--loop-loads"])
    assert r.exit_code == 0, r.output
    assert "Plain global loads inside loops" in " ".join(r.output.split())
    kernels = [k for rep in json.loads(out.read_text())["reports"] for k in rep["kernels"]]
    assert kernels and all("in_step" in k["loop_loads"] for k in kernels)
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 0 and "Plain global loads" not in " ".join(r.output.split())
