"""Measurements and reports: FLOPs/params (flops), energy (energy), per-layer profile (profile),
isolated latency/throughput (latency), and the model-level report (model_report)."""
