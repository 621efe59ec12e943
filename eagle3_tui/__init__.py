"""eagle3-tui: a terminal console to debug EAGLE-3 speculative decoding on an SGLang server."""

__version__ = "0.1.0"
