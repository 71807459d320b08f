"""Faults beyond process death: power loss and disk faults (CONTRACT W, E)."""
