"""Screens: the main screen, the first-run progress screen, help, and the modals (apply diff, confirm)."""
