"""What SGLang says and wants: log lines, launch args, the HTTP API. Pure; no I/O beyond httpx in client."""
