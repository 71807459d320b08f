"""sqlite backend."""
