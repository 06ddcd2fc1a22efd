"""Plain PyTorch reference implementations of every op of the DeepSeek-V4 decode path (SPEC section 3).

Each op is written once here, with visible fp32 upcasts (`acc`), and imported by the op specs, the
tests, verify, tune, bench and the decoder's reference backend. Import as `kernelbench.reference`.
"""
