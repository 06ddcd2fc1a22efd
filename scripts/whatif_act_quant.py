"""What-if copies of the installed package for the device scripts (timing only: the results are wrong, nothing is
verified): the act-quant launches skipped, the codes of the first call at each shape reused.

    python3 scripts/whatif_act_quant.py FRONT_PY QUANT_PY OUT_DIR

writes OUT_DIR/front_whatif.py (kernels/front.py `_gemm_activation`: attention_front, attention_q, indexer_q) and
OUT_DIR/quant_whatif.py (kernels/quant.py `_launch_fp8`: every act_quant_fp8 launch); the scripts copy one over the
installed file (scripts/device_lib.sh `installed`) and put the saved original back after."""
import pathlib
import sys

ACT_QUANT = '    xq, sx = _launch_fp8(x, 128, "ue8m0", False, None, "act_quant_fp8")\n'
REUSED = ('    key = ("whatif", tuple(x.shape), str(x.device))\n'
          '    if key not in _WHATIF:\n        _WHATIF[key] = _launch_fp8(x, 128, "ue8m0", False, None, "act_quant_fp8")\n'
          '    xq, sx = _WHATIF[key]\n')
QUANT_WRAPPER = '''
_WHATIF = {}


def _launch_fp8(x, group, scale_fmt, simulate, config, op):
    if op != "act_quant_fp8" or simulate:
        return _launch_fp8_real(x, group, scale_fmt, simulate, config, op)
    key = (tuple(x.shape), group, scale_fmt, str(x.device))
    if key not in _WHATIF:
        _WHATIF[key] = _launch_fp8_real(x, group, scale_fmt, simulate, config, op)
    return _WHATIF[key]
'''


def main(front: pathlib.Path, quant: pathlib.Path, out: pathlib.Path) -> None:
    src = front.read_text()
    assert src.count(ACT_QUANT) == 1, "front.py: the act_quant line moved"
    (out / "front_whatif.py").write_text(src.replace(ACT_QUANT, REUSED) + "\n_WHATIF = {}\n")
    q = quant.read_text()
    assert q.count("def _launch_fp8(") == 1, "quant.py: _launch_fp8 moved"
    (out / "quant_whatif.py").write_text(q.replace("def _launch_fp8(", "def _launch_fp8_real(") + QUANT_WRAPPER)


if __name__ == "__main__":
    main(*map(pathlib.Path, sys.argv[1:4]))
