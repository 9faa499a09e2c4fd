"""Regenerate the stateless PyTorch exports in ``tests/data/torch_stateless/`` (``rnnir fix --expose-state`` tests).

Run once by hand (the outputs are committed; tests never need torch)::

    pip install torch==2.13.0     # CPU wheel; not a project dependency
    python tests/data/make_torch_stateless.py

Each model calls its recurrent module *without* an initial state, the way an
encoder is usually exported, so the ONNX file starts every call from zeros and
returns no state.  For each ``<name>`` this writes ``<name>.ts.onnx``
(TorchScript exporter, opset 17, dynamic ``T`` and ``B``) and ``<name>.npz``:
``x`` (T=12, batch 1) and ``y``, PyTorch's output of one call over the whole
sequence -- what chunked streaming of the exposed model must reproduce.
Kept apart from ``make_torch_models.py`` so adding models here does not reseed
the exports there.
"""

from __future__ import annotations

import pathlib
import warnings

import numpy as np
import torch
from torch import nn

OUT = pathlib.Path(__file__).resolve().parent / "torch_stateless"
IN, HID, HEAD, T = 8, 16, 4, 12


class LstmEncoder(nn.Module):
    """nn.LSTM(8, 16) without (h0, c0) + Linear(16, 4)."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(IN, HID)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


class Gru2Encoder(nn.Module):
    """nn.GRU(8, 16, num_layers=2) without h0 + Linear(16, 4)."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(IN, HID, num_layers=2)
        self.head = nn.Linear(HID, HEAD)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y)


MODELS = {"lstm_encoder_stateless": LstmEncoder, "gru2_encoder_stateless": Gru2Encoder}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for seed, (name, factory) in enumerate(sorted(MODELS.items())):
        torch.manual_seed(4321 + seed)
        model = factory().eval()
        x = torch.randn(T, 1, IN, generator=torch.Generator().manual_seed(77 + seed))
        with torch.no_grad():
            y = model(x)
        np.savez(OUT / f"{name}.npz", x=x.numpy().astype(np.float32), y=y.numpy().astype(np.float32))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            torch.onnx.export(
                model, (x[:4],), str(OUT / f"{name}.ts.onnx"), dynamo=False, opset_version=17,
                input_names=["x"], output_names=["y"], dynamic_axes={"x": {0: "T", 1: "B"}, "y": {0: "T", 1: "B"}},
            )
        print(name, "ok")


if __name__ == "__main__":
    main()
