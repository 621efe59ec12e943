"""The demo world and the sim server as fixtures (filled in by the sim work)."""
