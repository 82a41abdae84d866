"""mirror."""
