"""The DeepSeek-V4 decoder built from the registry's ops: model (the layers, once over `backend.Ops`),
cache, tp (tensor parallelism), checkpoint (official layout), decode_bench (whole-model timing), and
fidelity + official + official_kernels (comparison with DeepSeek's official inference code)."""
