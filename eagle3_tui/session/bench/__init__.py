"""The benchmark: prompts as chat or raw (chat.py), through the serving engine's API (senders.py), run and
recorded by the part (part.py)."""
