"""Optuna (>= 5) sweeper for Hydra with a correctness gate."""
