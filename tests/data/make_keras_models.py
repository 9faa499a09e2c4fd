"""Regenerate the Keras models in ``tests/data/keras/`` (tf2onnx exports of Keras recurrent cells and layers).

Keras writes recurrences in its own ways, which other exporters do not: cells as plain ops in *column* layout
(``x @ kernel`` with ``kernel`` of shape ``[input, 4H]``, gate order i, f, c, o; GRU with ``reset_after``), and
layers that are not unrolled as one ONNX ``Loop`` each, whose body reads the weights as loop-carried values handed
back unchanged and counts time with its own carried counter. Streaming models (DTLN-style noise suppression) pack
the states of stacked layers on *inner* axes, ``[1, layers, H, (h, c)]``, and their state outputs are named by the
converter, not after the inputs. Run once by hand (outputs are committed; tests never need TensorFlow)::

    python -m venv /work/venvs/tf
    /work/venvs/tf/bin/pip install tensorflow-cpu==2.21.0 tf2onnx==1.17.0 onnx onnxruntime numpy
    /work/venvs/tf/bin/python tests/data/make_keras_models.py

For every model this writes ``<name>.onnx`` (opset 13) and ``<name>.calls.npz``: Keras' own outputs of 3
consecutive calls with the state fed back (``call{k}_in_NAME`` / ``call{k}_out_NAME``, ``pairs`` = the state
input and output names); time-axis models also hold one call over the 3 chunks at once (``full_in_NAME`` /
``full_out_NAME``). Every file is run in onnxruntime against Keras (atol 1e-5) before it is written.
"""

from __future__ import annotations

import os
import pathlib
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import tensorflow as tf  # noqa: E402
import tf2onnx  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent / "keras"
F, H, T = 6, 8, 3  # input features, hidden size, steps per call of the time-axis models
rng = np.random.default_rng(0)
tf.random.set_seed(0)
tf.keras.utils.set_random_seed(0)


def _randomise(layer: tf.keras.layers.Layer) -> None:
    """Non-zero biases and weights of a size that keeps the gates away from saturation."""
    layer.set_weights([rng.normal(0, 0.4, w.shape).astype(np.float32) for w in layer.get_weights()])


def export(name: str, fn, sig: list[tf.TensorSpec], pairs: list[tuple[str, str]], time_axis: int | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = pathlib.Path(tmp) / "m.onnx"
        tf2onnx.convert.from_function(fn, input_signature=sig, opset=13, output_path=str(path))
        model = onnx.load(str(path))
    model.producer_name, model.doc_string = "tf2onnx", f"Keras (TensorFlow {tf.__version__}) export for rnnir's tests"
    onnx.checker.check_model(model, full_check=True)
    outs = [o.name for o in model.graph.output]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    data: dict[str, np.ndarray] = {"pairs": np.array(pairs, dtype=str)}
    feeds = {s.name: np.zeros([d or 1 for d in s.shape], np.float32) for s in sig}
    xs = [rng.normal(0, 1, feeds[sig[0].name].shape).astype(np.float32) for _ in range(3)]
    by_out = dict(pairs)
    for k in range(3):
        feeds[sig[0].name] = xs[k]
        want = [np.asarray(v) for v in fn(*[tf.constant(feeds[s.name]) for s in sig])]
        got = sess.run(outs, feeds)
        for o, w, g in zip(outs, want, got):
            assert np.allclose(w, g, atol=1e-5), (name, o, float(np.abs(w - g).max()))
        for n, v in feeds.items():
            data[f"call{k}_in_{n}"] = v.copy()
        for o, w in zip(outs, want):
            data[f"call{k}_out_{o}"] = w
        feeds = {**feeds, **{i: want[outs.index(o)] for i, o in by_out.items()}}
    if time_axis is not None:
        full = {s.name: np.zeros([d or 1 for d in s.shape], np.float32) for s in sig}
        full[sig[0].name] = np.concatenate(xs, axis=time_axis)
        want = [np.asarray(v) for v in fn(*[tf.constant(full[s.name]) for s in sig])]
        for n, v in full.items():
            data[f"full_in_{n}"] = v
        for o, w in zip(outs, want):
            data[f"full_out_{o}"] = w
    OUT.mkdir(exist_ok=True)
    onnx.save(model, str(OUT / f"{name}.onnx"))
    np.savez(OUT / f"{name}.calls.npz", **data)
    print(name, sorted({n.op_type for n in model.graph.node}), [i.name for i in model.graph.input], outs)


def main() -> None:
    # one step of a Keras LSTMCell: plain ops, column layout, gate order i, f, c, o
    cell = tf.keras.layers.LSTMCell(H)
    cell.build((1, F))
    _randomise(cell)

    @tf.function
    def lstm_cell(x, h, c):
        y, (h2, c2) = cell(x, [h, c])
        return y, h2, c2
    export("keras_lstm_cell", lstm_cell, [tf.TensorSpec([1, F], tf.float32, "input_1"), tf.TensorSpec([1, H], tf.float32, "input_2"),
                                           tf.TensorSpec([1, H], tf.float32, "input_3")],
           [("input_2", "Identity_1:0"), ("input_3", "Identity_2:0")], None)

    # one step of a Keras GRUCell (reset_after=True, Keras' default: the reset gate scales R h + b_R)
    gcell = tf.keras.layers.GRUCell(H)
    gcell.build((1, F))
    _randomise(gcell)

    @tf.function
    def gru_cell(x, h):
        y, h2 = gcell(x, h)
        return y, h2
    export("keras_gru_cell", gru_cell, [tf.TensorSpec([1, F], tf.float32, "input_1"), tf.TensorSpec([1, H], tf.float32, "input_2")],
           [("input_2", "Identity_1:0")], None)

    # an LSTM layer with unroll=True: T steps of plain ops
    unrolled = tf.keras.layers.LSTM(H, return_sequences=True, return_state=True, unroll=True)
    unrolled.build((1, T, F))
    _randomise(unrolled)

    @tf.function
    def lstm_unrolled(x, h, c):
        return unrolled(x, initial_state=[h, c])
    export("keras_lstm_unrolled", lstm_unrolled, [tf.TensorSpec([1, T, F], tf.float32, "input_1"), tf.TensorSpec([1, H], tf.float32, "input_2"),
                                                   tf.TensorSpec([1, H], tf.float32, "input_3")],
           [("input_2", "Identity_1:0"), ("input_3", "Identity_2:0")], None)

    # an LSTM layer and a GRU layer as tf2onnx writes them when not unrolled: one Loop each, any number of steps
    layer = tf.keras.layers.LSTM(H, return_sequences=True, return_state=True)
    layer.build((1, None, F))
    _randomise(layer)

    @tf.function
    def lstm_loop(x, h, c):
        return layer(x, initial_state=[h, c])
    export("keras_lstm_loop", lstm_loop, [tf.TensorSpec([1, None, F], tf.float32, "input_1"), tf.TensorSpec([1, H], tf.float32, "input_2"),
                                          tf.TensorSpec([1, H], tf.float32, "input_3")],
           [("input_2", "Identity_1:0"), ("input_3", "Identity_2:0")], 1)

    glayer = tf.keras.layers.GRU(H, return_sequences=True, return_state=True)
    glayer.build((1, None, F))
    _randomise(glayer)

    @tf.function
    def gru_loop(x, h):
        return glayer(x, initial_state=h)
    export("keras_gru_loop", gru_loop, [tf.TensorSpec([1, None, F], tf.float32, "input_1"), tf.TensorSpec([1, H], tf.float32, "input_2")],
           [("input_2", "Identity_1:0")], 1)

    # DTLN-style: two stacked LSTM layers (one Loop each), states packed as [1, layers, H, (h, c)]
    l1 = tf.keras.layers.LSTM(H, return_sequences=True, return_state=True)
    l2 = tf.keras.layers.LSTM(H, return_sequences=True, return_state=True)
    l1.build((1, None, F))
    l2.build((1, None, H))
    _randomise(l1)
    _randomise(l2)

    @tf.function
    def stacked(x, states):
        y, h1, c1 = l1(x, initial_state=[states[:, 0, :, 0], states[:, 0, :, 1]])
        y, h2, c2 = l2(y, initial_state=[states[:, 1, :, 0], states[:, 1, :, 1]])
        return y, tf.stack([tf.stack([h1, c1], axis=-1), tf.stack([h2, c2], axis=-1)], axis=1)
    export("keras_lstm_stacked_packed", stacked, [tf.TensorSpec([1, None, F], tf.float32, "input_4"), tf.TensorSpec([1, 2, H, 2], tf.float32, "input_5")],
           [("input_5", "Identity_1:0")], 1)


if __name__ == "__main__":
    main()
