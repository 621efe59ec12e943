"""What the host says about the server: the processes found, where they run, the draft and target files, the training data, the doctor's facts."""
