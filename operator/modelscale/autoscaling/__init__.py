"""autoscaling."""
