"""`make demo`: watch modelscale scale a real Triton deployment ahead of a replayed trace."""
