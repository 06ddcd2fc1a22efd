"""kernelbench: verification, timing, autotuning and regression testing of Triton kernels for the
DeepSeek-V4 decode path."""
__version__ = "0.1.0"
