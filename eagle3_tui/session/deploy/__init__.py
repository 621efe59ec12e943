"""Where the server runs decides how it is restarted: the deployment part and the strategies of its owners (container engine, systemd, other nodes)."""
