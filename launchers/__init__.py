"""Server lifecycle backends: local process group, SSH (systemd or process)."""
