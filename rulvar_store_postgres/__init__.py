"""postgres backend."""
