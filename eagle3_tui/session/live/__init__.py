"""What the attached server says while it runs: its log followed and parsed, its run state, /server_info and /metrics polled."""
