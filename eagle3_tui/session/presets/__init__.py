"""Presets: the catalogue and plans (catalog.py), each engine's presets (engine.py), and the part that applies
and rolls them back (part.py)."""
