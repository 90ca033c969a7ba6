"""The `modelscale` commands that need a cluster: `run` and `recommend`."""
