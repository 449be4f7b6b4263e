"""score."""
