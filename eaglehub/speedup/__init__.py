"""speedup."""
