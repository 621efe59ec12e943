"""Names vulture (make lint) cannot see used: read by a framework or a library, not by our code.

Each line names the attribute as `_.name`, with who reads it.
"""

# ruff: noqa
_ = object()

_._updates  # ui/widgets/measured_log.py: Textual's Log reads them (tests/ui/test_measured_log.py)
_._clear_y
_.data_known  # ui/widgets/accuracy_pane.py: a reactive, read by its watch_data_known
_.auto_scroll  # Textual's Log reads it
_.daemon_threads  # sim/service.py: socketserver.ThreadingMixIn reads it
_.protocol_version  # sim/routes.py: http.server.BaseHTTPRequestHandler reads these and calls do_* and log_message
_.server_version
_.sys_version
_.validate_host_public_key  # remote/ssh.py: asyncssh calls it
_.skip_server_warmup  # sim/flags.py: SGLang's flag, accepted by the sim, which has no warm-up to skip
# sglang/installed/spec.py: read from the installed release's source; no doctor rule reads them yet
_.incomplete_asserts
_.topk1_forces_draft
_.page_size_forces_topk1
_.tempdir  # tests/conftest.py: tempfile reads it
_.connect_kwargs  # tests/plugins/sshd.py: the sshd fixture's API for a test that connects with asyncssh itself
_batch  # benchmarks/ui_bench.py: imported by the code it runs in a child process (a string)
_.block_on_close  # tests/fleet_fakes.py: socketserver.ThreadingMixIn reads it
_.option_string  # cli.py: argparse passes it to an Action's __call__
_.request_queue_size  # benchmarks/fleet_bench.py: socketserver reads it (the listen backlog)
