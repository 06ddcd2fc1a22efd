"""Op specs, one module per op family: each registers OpSpecs (reference, shapes, inputs, roofline
counts, tolerance) with kernelbench.registry."""
