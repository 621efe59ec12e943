"""What servers, users and their files hand us, read one engine-neutral way each: JSON and text files
(`readers`), a launch's `--config` YAML (`launch_config`), the Prometheus text of `/metrics` (`promtext`),
an OpenAI-compatible answer (`openai_answer`) and the tracebacks in a log (`tracebacks`).

Pure and import-free here: the accuracy check's zip takes this package with `readers` to a bare Python.
"""
