"""What is measured on the attached server: the benchmark (bench.py; its prompts as chat or raw, chat.py,
through the serving engine's API, senders.py) and the accuracy check with the training data it reads
(accuracy.py; the job itself is check/job.py)."""
