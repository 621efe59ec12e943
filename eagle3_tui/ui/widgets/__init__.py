"""The console's widgets; each renders a piece of the session's state and holds no logic."""
