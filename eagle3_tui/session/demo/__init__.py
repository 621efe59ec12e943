"""The demo world's lifecycle (lifecycle.py) and the real engines' demo launch helpers (real_sglang.py, real_vllm.py)."""
