"""The programs test_text_structure_properties.py draws reach what its property claims to cover: every node kind,
nested If, names that need quoting, sizes either side of the elision limit (else the property proves little).  A file
of its own: the mutation tool runs the cheapest test of each file, and that must be the property itself."""

from __future__ import annotations

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402

from rnnir.ir import Program  # noqa: E402
from rnnir.ir.nodes import Compute  # noqa: E402
from rnnir.ir.text import ELIDED_FLOATS, MAX_PRINTED_ELEMENTS, print_program  # noqa: E402
from tests.ir.test_text_structure_properties import EXAMPLES, programs  # noqa: E402


def test_the_generated_programs_reach_every_boundary_and_node_kind():
    """The strategy really draws what the property claims to cover (else the property proves little)."""
    seen: set[str] = set()

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None)
    @given(programs())
    def collect(prog: Program) -> None:
        text = print_program(prog)
        for what, needle in [("elided", " ...>"), ("quoted", '%"'), ("view", ", view>"), ("copy", ", copy>"), ("if", "region.then_branch"),
                             ("nested", "if1_out"), ("order#", "-> #"), ("alias slot", "aliases slot:"), ("alias out", "aliases out:"),
                             ("address", " address "), ("suggested", "suggested pair"), ("nothing", "<nothing>"), ("quant", " q(scale="),
                             ("layout", "layout="), ("hole", "_, %r1"), ("domain", "com.microsoft."), ("unknown shape", "[*]")]:
            if needle in text:
                seen.add(what)
        if "'value': 'the end'" in text:
            seen.add("return value")
        arrays = [v.const for v in prog.externals.values() if v.const is not None and v.uses]
        arrays += [a for n in prog.nodes if isinstance(n, Compute) for a in n.attributes.values() if isinstance(a, np.ndarray)]
        seen.update(f"size {np.asarray(a).size}" for a in arrays)

    collect()
    missing = {"return value", "hole", "elided", "quoted", "view", "copy", "if", "nested", "order#", "alias slot", "alias out", "address", "suggested", "nothing",
               "quant", "layout", "domain", "unknown shape", f"size {ELIDED_FLOATS}", f"size {ELIDED_FLOATS + 1}",
               f"size {MAX_PRINTED_ELEMENTS + 1}"} - seen
    assert not missing
