"""rnnir.semantics."""
