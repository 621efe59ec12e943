"""Hosts, local and SSH: commands, a lossless follower, atomic writes, process groups, port forwards.

Knows nothing of SGLang.
"""
