"""fast_init: the instance it makes is the one the dataclass's own ``__init__`` (field by field through the class's
``__setattr__``, then ``__post_init__``) would have made, for every class that uses it."""

from __future__ import annotations

import dataclasses
import inspect
from types import MappingProxyType
from typing import Any

import pytest

from rnnir.analysis.slicemaps import PortRef, SliceMap
from rnnir.analysis.slices import TracedPair
from rnnir.analysis.tracer import Abs, Ref
from rnnir.errors import IRError
from rnnir.ir.attributes import Provenance, SlotInit, TensorType
from rnnir.ir.nodes import Compute, LoadSlot, Node, Output, Recurrent, Return, Slot, Store, Value
from rnnir.ir.ownership import IRTuple
from rnnir.ir.pairs import StatePair
from rnnir.lower.dataflow import StateLink, _Carrier
from rnnir.lower.pairing import GraphIO
from rnnir.lower.scope import Definition
from rnnir.passes.coverage import RecurrenceVerdict, SliceVerdict
from rnnir.passes.diagnostics import Location
from rnnir.passes.store_destinations.context import Owner
from rnnir.util.fastinit import fast_init

FAST = (Value, Slot, Output, Node, LoadSlot, Compute, Recurrent, Store, Return, TensorType, Provenance, SlotInit, StatePair,
        Definition, GraphIO, StateLink, _Carrier, Ref, Abs, PortRef, SliceMap, TracedPair, Location, SliceVerdict, RecurrenceVerdict,
        Owner)


def field_by_field(cls: type, **given: Any) -> Any:
    """What the dataclass's generated ``__init__`` does: each field assigned in order (``object.__setattr__`` for a
    frozen class, the class's own ``__setattr__`` otherwise), its default when not given, then ``__post_init__``."""
    obj = object.__new__(cls)
    frozen = cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    for f in dataclasses.fields(cls):
        if f.name in given:
            value = given[f.name]
        elif f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            raise AssertionError(f"{cls.__name__}.{f.name} needs a value")
        (object.__setattr__ if frozen else setattr)(obj, f.name, value)
    if hasattr(cls, "__post_init__"):
        obj.__post_init__()
    return obj


def same_fields(a: Any, b: Any) -> None:
    assert list(vars(a)) == list(vars(b))  # the same attributes, in the same order
    for name, x in vars(a).items():
        y = vars(b)[name]
        assert type(x) is type(y), name
        if isinstance(x, MappingProxyType):
            assert dict(x) == dict(y), name
        elif isinstance(x, (TensorType, Provenance, SlotInit)):
            assert x == y, name
        elif isinstance(x, (tuple, str, int, type(None), list, dict, frozenset)):  # made afresh, or a default
            assert x == y, name
        else:
            assert x is y, name


@pytest.mark.parametrize("cls", FAST, ids=lambda c: c.__name__)
def test_the_signature_is_the_dataclasss_fields_with_their_defaults(cls):
    params = list(inspect.signature(cls).parameters.values())
    fields = [f for f in dataclasses.fields(cls) if f.init]
    assert [p.name for p in params] == [f.name for f in fields]
    for p, f in zip(params, fields):
        if f.default is not dataclasses.MISSING:
            assert p.default is f.default
        elif f.default_factory is not dataclasses.MISSING:
            assert repr(p.default) == "<factory>"
        else:
            assert p.default is inspect.Parameter.empty


def _required(cls: type) -> dict[str, Any]:
    return {f.name: f"{f.name}-value" for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}


@pytest.mark.parametrize("cls", FAST, ids=lambda c: c.__name__)
def test_defaults_only_make_the_same_instance_as_field_by_field(cls):
    given = _required(cls)
    if cls is Recurrent:
        given["kind"] = "GRU"
    same_fields(cls(**given), field_by_field(cls, **given))


def test_values_given_go_through_the_same_conversions():
    v = Value(name="a")
    w = Value(name="b", type=TensorType("float32", (1, 2)), index=3, const=None, uses=[(None, 0)], kind="token")
    same_fields(w, field_by_field(Value, name="b", type=w.type, index=3, const=None, uses=[(None, 0)], kind="token"))
    assert type(w.uses) is IRTuple  # a list given becomes the immutable tuple, as a later write would
    c = Compute(op="Add", inputs=[v, None], outputs=[w], attributes={"axis": 1}, provenance=Provenance(node="n"))
    same_fields(c, field_by_field(Compute, op="Add", inputs=[v, None], outputs=[w], attributes={"axis": 1}, provenance=c.provenance))
    assert type(c.inputs) is IRTuple and type(c.attributes) is MappingProxyType
    s = Slot(name="h", type=TensorType("float32"))
    assert s.address == "slot:h"  # __post_init__ ran
    same_fields(s, field_by_field(Slot, name="h", type=s.type))


def test_a_pending_constant_is_stored_behind_the_property():
    from rnnir.ir.nodes import PendingConst

    pending = PendingConst((2,), lambda: [1, 2], lambda: [1, 2])  # type: ignore[arg-type,return-value]
    v = Value(name="c", const=pending)  # type: ignore[arg-type]
    assert vars(v)["_const"] is pending and "const" not in vars(v)
    assert v.has_const and v.const == [1, 2]


def test_post_init_checks_still_refuse_bad_fields():
    with pytest.raises(IRError, match="slot init kind"):
        SlotInit("nonsense")
    with pytest.raises(IRError, match="unknown recurrence kind"):
        Recurrent(kind="NotAnRNN")
    with pytest.raises(TypeError):
        Value()  # type: ignore[call-arg]  # name is required
    with pytest.raises(TypeError):
        TensorType("float32", (1,), None, None, "one too many")  # type: ignore[call-arg]


def test_frozen_instances_stay_frozen():
    t = TensorType("float32")
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.dtype = "int64"  # type: ignore[misc]


def test_keyword_only_and_init_false_fields():
    @fast_init
    @dataclasses.dataclass
    class K:
        a: int
        b: list[int] = dataclasses.field(default_factory=list)
        c: int = dataclasses.field(default=7, init=False)
        d: str = dataclasses.field(default="x", kw_only=True)

    assert str(inspect.signature(K)) == "(a, b=<factory>, *, d='x')"
    k = K(1, d="y")
    assert vars(k) == {"a": 1, "b": [], "c": 7, "d": "y"}
    assert K(2).b is not k.b  # the factory runs per instance
    with pytest.raises(TypeError):
        K(1, [], "y")  # type: ignore[misc]  # d is keyword-only


def test_a_class_with_slots_is_refused():
    with pytest.raises(TypeError, match="__slots__"):
        @fast_init
        @dataclasses.dataclass(slots=True)
        class S:
            a: int
