"""Modal screens: the apply diff, confirmations, help and the first-run progress screen."""
