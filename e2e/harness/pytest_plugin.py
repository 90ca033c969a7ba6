"""pytest fixtures for real servers (filled in by the cluster harness work)."""
