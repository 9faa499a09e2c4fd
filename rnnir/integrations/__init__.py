"""Adapters that run rnnir inside other tools' pipelines; each imports its tool, so import the one you need
(``rnnir.integrations.onnx_ir``): importing this package imports none of them."""
