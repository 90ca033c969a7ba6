"""Root conftest: the cluster, Prometheus and Triton fixtures come from the e2e harness.

Hypothesis's per-example deadline (200 ms by default) is a timed assertion: on a shared,
loaded machine it failed a builder property test that passes in 3 s on an idle one. Tests
here assert behaviour, not speed (benchmarks print timings instead), so it is off for all.
"""

from hypothesis import settings

settings.register_profile("modelscale", deadline=None)
settings.load_profile("modelscale")

pytest_plugins = ["harness.pytest_plugin"]
