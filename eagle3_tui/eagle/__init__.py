"""What EAGLE-3 is: wiring conventions, draft config, checkpoint, drafter, data, the accuracy check."""
