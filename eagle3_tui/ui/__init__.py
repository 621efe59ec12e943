"""The Textual console. Talks only to `eagle3_tui.session`."""
