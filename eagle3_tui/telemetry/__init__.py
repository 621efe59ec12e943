"""Time series, derived metrics and the run ledger."""

STATUS_WINDOW_S = 60.0
"""The window (seconds of data) the status bar's live accept length and tok/s average over; the report
states the same numbers over the same window. Here, not in metrics.py, so the console's view model reads it
without importing the log model before the first frame."""
