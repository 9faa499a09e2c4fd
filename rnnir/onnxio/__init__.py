"""rnnir.onnxio."""
