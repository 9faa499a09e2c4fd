"""fast_init: the instance its compiled ``__init__`` makes is the one the dataclass's own ``__init__`` (field by field
through the class's ``__setattr__``, then ``__post_init__``) would have made, for every class that uses it; a class
switches to the compiled one after WARM_UP instances."""

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
from rnnir.util.fastinit import WARM_UP, compiled_init, fast_init

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


def compiled(cls: type, *args: Any, **given: Any) -> Any:
    """An instance made by the compiled ``__init__`` (whether or not the class has switched to it yet)."""
    obj = object.__new__(cls)
    compiled_init(cls)(obj, *args, **given)
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
    params = list(inspect.signature(compiled_init(cls)).parameters.values())[1:]  # after self
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
    same_fields(compiled(cls, **given), field_by_field(cls, **given))
    same_fields(cls(**given), field_by_field(cls, **given))  # whichever __init__ the class has now


def test_values_given_go_through_the_same_conversions():
    v = Value(name="a")
    w = compiled(Value, name="b", type=TensorType("float32", (1, 2)), index=3, const=None, uses=[(None, 0)], kind="token")
    same_fields(w, field_by_field(Value, name="b", type=w.type, index=3, const=None, uses=[(None, 0)], kind="token"))
    assert type(w.uses) is IRTuple  # a list given becomes the immutable tuple, as a later write would
    c = compiled(Compute, op="Add", inputs=[v, None], outputs=[w], attributes={"axis": 1}, provenance=Provenance(node="n"))
    same_fields(c, field_by_field(Compute, op="Add", inputs=[v, None], outputs=[w], attributes={"axis": 1}, provenance=c.provenance))
    assert type(c.inputs) is IRTuple and type(c.attributes) is MappingProxyType
    s = compiled(Slot, name="h", type=TensorType("float32"))
    assert s.address == "slot:h"  # __post_init__ ran
    same_fields(s, field_by_field(Slot, name="h", type=s.type))


def test_a_pending_constant_is_stored_behind_the_property():
    from rnnir.ir.nodes import PendingConst

    pending = PendingConst((2,), lambda: [1, 2], lambda: [1, 2])  # type: ignore[arg-type,return-value]
    v = compiled(Value, name="c", const=pending)
    assert vars(v)["_const"] is pending and "const" not in vars(v)
    assert v.has_const and v.const == [1, 2]


def test_post_init_checks_still_refuse_bad_fields():
    with pytest.raises(IRError, match="slot init kind"):
        compiled(SlotInit, "nonsense")
    with pytest.raises(IRError, match="unknown recurrence kind"):
        compiled(Recurrent, kind="NotAnRNN")
    with pytest.raises(TypeError):
        compiled(Value)  # name is required
    with pytest.raises(TypeError):
        compiled(TensorType, "float32", (1,), None, None, "one too many")


def test_frozen_instances_stay_frozen():
    t = compiled(TensorType, "float32")
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

    warming = inspect.signature(K).parameters  # the dataclass's own, while warming up
    fast = list(inspect.signature(compiled_init(K)).parameters.values())[1:]
    assert [(p.name, p.kind, p.default) for p in fast] == [
        ("a", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty),
        ("b", inspect.Parameter.POSITIONAL_OR_KEYWORD, fast[1].default),
        ("d", inspect.Parameter.KEYWORD_ONLY, "x"),
    ]
    assert [p.name for p in warming.values()] == ["a", "b", "d"] and repr(fast[1].default) == "<factory>"
    k = compiled(K, 1, d="y")
    assert vars(k) == {"a": 1, "b": [], "c": 7, "d": "y"}
    assert compiled(K, 2).b is not k.b  # the factory runs per instance
    with pytest.raises(TypeError):
        compiled(K, 1, [], "y")  # d is keyword-only


def test_the_class_switches_to_the_compiled_init_after_warming_up():
    @fast_init
    @dataclasses.dataclass(frozen=True)
    class W:
        a: int
        b: tuple[int, ...] = ()

    made = [W(i) for i in range(WARM_UP + 3)]
    assert W.__init__.__code__.co_filename == "<string>"  # compiled (exec), no longer the wrapper around the dataclass's
    assert [w.a for w in made] == list(range(WARM_UP + 3))
    assert W(5, (1,)) == W(5, (1,)) and vars(W(5)) == {"a": 5, "b": ()}


def test_a_class_with_slots_is_refused():
    with pytest.raises(TypeError, match="__slots__"):
        @fast_init
        @dataclasses.dataclass(slots=True)
        class S:
            a: int
