"""The embedded SGLang simulator (python -m sweep.sim)."""
