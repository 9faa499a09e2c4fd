"""The stale and hc-swapped variants of check_multicall, on the seed recurrence ``h_t = 0.5 * h_{t-1} + x_t`` whose
every number is computed by hand, and the places h and c may be swapped (none where they are one place, or packed
deeper than one axis; a near-miss LSTM with h and c in two slots of one shape has one)."""

from __future__ import annotations

import numpy as np
import pytest

from rnnir.check.multicall.check import check_multicall
from rnnir.check.multicall.variants import hc_swaps
from rnnir.runtime import StatefulSession
from tests.check.test_multicall_comparisons import two_level_pack
from tests.check.test_multicall_seed import seed_rnn
from tests.check.test_multicall_stream import lstm


def test_the_stale_variant_starts_each_call_from_the_state_two_calls_back():
    # h = 0.5 h + x on x = 1..5, one step per call.  kept: 1, 2.5, 4.25, 6.125, 8.0625.  stale: calls 0 and 1 start
    # from 0 (1, 2); call 2 from call 0's 1 (3.5), call 3 from call 1's 2 (5), call 4 from call 2's 3.5 (6.75)
    report = check_multicall(seed_rnn(), {"x": np.arange(1, 6, dtype=np.float32).reshape(5, 1, 1)}, chunk_sizes=[1], variants=["persistent", "stale"])
    assert report.variant("stale", 1).per_call == pytest.approx([0.0, 0.5, 0.75, 1.125, 1.3125])


def test_h_and_c_in_one_place_or_two_levels_deep_are_no_swap():
    assert hc_swaps(StatefulSession(lstm(inputs=("x", "s", "s"), outs=("y", "sn", "cn")), pairs={"s": "sn"})) == []
    assert hc_swaps(StatefulSession(two_level_pack())) == []
    assert len(hc_swaps(StatefulSession(lstm()))) == 1  # near-miss: h0 and c0, two slots of one shape

