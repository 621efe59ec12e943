"""The demo world: a tiny target, a trained EAGLE-3 draft, and a simulated SGLang server."""
