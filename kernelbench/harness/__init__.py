"""The harness: what checks and measures an implementation of an op, whichever it is.
verify* + probes + testing (correctness against the fp64 reference), timing, tune (the offline
autotuner), calibrate + devices + fingerprint (the machine), roofline, scaling, history, gate, report,
export (reading results back), inspector (sm_120 / sm_90 compile-only checks)."""
