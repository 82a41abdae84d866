"""semantic."""
