"""Throughput and scaling benchmarks of slimtrain (not tests); see RESULTS.md."""

from core import compat  # noqa: F401  (must run before tf_slim is used)
