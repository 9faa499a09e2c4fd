"""Serving many streams of one model: the session pool and the batcher (:mod:`rnnir.serving.pool`)."""
