"""Rules: facts in, findings out. Pure functions."""
