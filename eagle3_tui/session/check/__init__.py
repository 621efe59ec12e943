"""The accuracy check as a job on the host: shipped as a zip, run next to the data, its temp folders cleaned."""
