"""trajkit."""
