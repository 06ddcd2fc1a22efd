"""Triton kernels for the DeepSeek-V4 decode path, one op family per module. Import as
`kernelbench.kernels`. Each module registers its launch wrappers as the `triton` implementation of
the ops it serves (kernelbench.registry.register_impl)."""
