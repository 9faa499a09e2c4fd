"""rnnir.util."""
