"""rulvar conformance kit."""
