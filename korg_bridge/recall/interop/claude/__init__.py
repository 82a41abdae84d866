"""claude."""
