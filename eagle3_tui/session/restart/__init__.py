"""The one restart path: the restarter, the host-wide lock, and the seam the deployment strategies plug into."""
