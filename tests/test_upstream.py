"""kernelbench.upstream: the private internals we use are there in the installed versions, and a
release that moves one gives a clear error naming the package and its version."""
import pytest

from kernelbench import upstream


def test_installed_versions_have_every_internal():
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction
    upstream.require_launcher_run(JITFunction)
    upstream.require_launcher_run(InterpretedFunction)
    interp, fn = upstream.interpreter_tensor_patcher()
    assert callable(fn) and interp.__name__ == "triton.runtime.interpreter"
    from hypothesis.internal.conjecture import engine
    before = engine.MAX_SHRINKING_SECONDS
    with upstream.hypothesis_shrink_cap(7):
        assert engine.MAX_SHRINKING_SECONDS == 7
    assert engine.MAX_SHRINKING_SECONDS == before


def test_database_key_is_the_one_hypothesis_uses(tmp_path):
    from hypothesis import given, settings, strategies as st
    from hypothesis.database import DirectoryBasedExampleDatabase
    db = DirectoryBasedExampleDatabase(str(tmp_path))

    @settings(database=db, max_examples=5)
    @given(st.integers(0, 10))
    def prop(x):
        assert x < 0

    upstream.set_hypothesis_database_key(prop, b"kb-key")
    with pytest.raises(AssertionError):
        prop()
    assert list(db.fetch(b"kb-key")), "hypothesis did not save the failure under our key"


def test_moved_shrink_constant_is_a_clear_error(monkeypatch):
    from hypothesis.internal.conjecture import engine
    monkeypatch.delattr(engine, "MAX_SHRINKING_SECONDS")
    with pytest.raises(upstream.UpstreamChanged, match=r"hypothesis \d.*MAX_SHRINKING_SECONDS"):
        with upstream.hypothesis_shrink_cap(7):
            pass


def test_changed_launcher_signature_is_a_clear_error():
    class Launcher:
        def run(self, *args, **kwargs):
            pass
    with pytest.raises(upstream.UpstreamChanged, match=r"triton \d.*run\(\*args, grid, warmup"):
        upstream.require_launcher_run(Launcher)


def test_moved_interpreter_patch_is_a_clear_error(monkeypatch):
    import triton.runtime.interpreter as interp
    monkeypatch.setattr(interp, "_patch_lang_tensor", lambda tensor: None)
    with pytest.raises(upstream.UpstreamChanged, match=r"triton \d.*_patch_lang_tensor"):
        upstream.interpreter_tensor_patcher()


def test_interpreter_compare_ops_are_checked(monkeypatch):
    interp, builder, names = upstream.interpreter_compare_ops()
    assert "create_icmpSLT" in names and "create_fcmpOLT" in names
    monkeypatch.setattr(builder, "create_icmpSLT", lambda self, a, b, c: None)
    with pytest.raises(upstream.UpstreamChanged, match=r"triton \d.*create_icmp"):
        upstream.interpreter_compare_ops()
