"""Headless subcommands. Each module has `register(subparsers, common)`; heavy imports stay inside run()."""
