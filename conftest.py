"""Root conftest: the cluster, Prometheus and Triton fixtures come from the e2e harness."""

pytest_plugins = ["harness.pytest_plugin"]
