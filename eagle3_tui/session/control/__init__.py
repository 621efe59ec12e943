"""What changes what runs: the server started, stopped and restarted through the one restart path
(server.py), and the presets applied and rolled back (presets.py)."""
