"""The core tables (allocations, frees, timeline) built from a decoded trace,
and TensorFlow's dtypes."""
