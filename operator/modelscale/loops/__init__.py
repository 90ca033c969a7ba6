"""The I/O shell of each loop: read, call the pure core, write. kopf-free, so the CLI and
the benchmarks drive the same code the handlers do."""
