"""Time series, derived metrics and the run ledger."""
