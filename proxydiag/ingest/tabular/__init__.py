"""tabular."""
