"""Terminal tables and plots of results: one trial, one sweep, a comparison.

``trial_summary`` (printed when a trial ends), ``sweep_summary`` (when a
multirun ends), ``table`` (``python -m sweep.report``), ``plots`` (PNG files).
"""
