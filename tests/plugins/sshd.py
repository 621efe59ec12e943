"""Real OpenSSH sshd on 127.0.0.1 (filled in by the host-layer work)."""
