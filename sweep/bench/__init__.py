"""Benchmark harness: load generation, coding eval, sandbox."""
