"""RN100 unused-suppression: a suppression stored in the model matches no finding.

Found by :mod:`rnnir.passes.suppression`, which imports this declaration; the catalogue registers it in
:mod:`rnnir.passes.rules` (``rnnir explain RN100`` prints the doc)."""

from __future__ import annotations

from rnnir.onnxio.metadata import META_NOQA
from rnnir.passes.diagnostics import Message, Severity, rule

__all__ = ["RULE"]

RULE = rule(
    "RN100",
    "unused-suppression",
    Severity.WARNING,
    "a suppression stored in the model matches no finding",
    f"""
    What it finds
        An entry of the model's suppression list (``metadata_props`` ``{META_NOQA}``, the model's ``# noqa``)
        that suppressed nothing in this run: no finding of its rule, or none naming its node, or a code that
        is not a rule at all.  ``rnnir lint`` runs every rule whatever the selection, so an entry is judged
        even when its rule is not selected (``passes.run`` judges only the rules it ran).

    Why it matters
        A suppression outlives the bug it hid: once the model is fixed, a stale entry would silently hide
        the next real finding of that rule.  Removing it keeps the list an honest account of accepted findings.

    Bad
        metadata_props {META_NOQA} = ["SD009", "SD002:/lstm/LSTM"]    # the model has no SD002 any more

    Fixed
        metadata_props {META_NOQA} = ["SD009"]
        rnnir fix model.onnx --unsuppress SD002:/lstm/LSTM --in-place
    """,
    messages={
        "unknown-code": Message(
            "suppression {text!r} in metadata_props {key!r} names {code!r}, which is not a rule code",
            hint="remove it: rnnir fix MODEL --unsuppress {text!r} --in-place",
        ),
        "no-finding": Message(
            "suppression {text!r} in metadata_props {key!r} matches no {code} finding",
            hint="remove it: rnnir fix MODEL --unsuppress {text!r} --in-place",
        ),
        "no-finding-at-node": Message(
            "suppression {text!r} in metadata_props {key!r} matches no {code} finding naming {node!r}",
            hint="remove it: rnnir fix MODEL --unsuppress {text!r} --in-place",
        ),
    },
)
