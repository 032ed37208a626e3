"""dialects."""
