"""What the session knows of the server it is attached to (known.py), how it looks at the host again
(survey.py: the servers found, the launch facts, the doctor's findings), and how it records a run in
the ledger (recorder.py)."""
