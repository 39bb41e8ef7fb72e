"""drafter."""
