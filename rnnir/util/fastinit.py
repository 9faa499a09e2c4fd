"""A dataclass ``__init__`` that fills the new instance's ``__dict__`` directly.

The ``__init__`` :func:`dataclasses.dataclass` writes assigns each field through the class's ``__setattr__``:
a Python call per field for the IR's elements (their ``__setattr__`` keeps a program's version, see
:mod:`rnnir.ir.ownership`) and ``object.__setattr__`` per field for a frozen class.  Lowering a 100k-node
model makes about 30,000 of them (values, nodes, tensor types, provenances, definitions), a few microseconds
each.  :func:`fast_init` gives the class an ``__init__`` with the same parameters, defaults and
``__post_init__`` call that stores each field straight into ``__dict__``.  What the class's ``__setattr__`` does
to a field besides storing it must be said again in ``_INIT_CONVERT`` (field name -> the function its value
goes through, such as making a list an immutable tuple); a field the class keeps behind a property is set
through the property.  The instance is the one the dataclass's own ``__init__`` would have made (the IR's
tests compare the two).
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from typing import Any, TypeVar

__all__ = ["fast_init"]

T = TypeVar("T", bound=type)

class _Factory:
    """The default of a field with a default_factory: the factory runs when the argument is not given."""

    def __repr__(self) -> str:
        return "<factory>"  # as the dataclass's own __init__ shows it


_NO_ARGUMENT = _Factory()


#: instances a class makes with the dataclass's own ``__init__`` before its fast one is compiled: compiling costs
#: about as much as a hundred slow constructions, which a small model never makes of most classes
WARM_UP = 128


def fast_init(cls: T) -> T:
    """Give dataclass ``cls`` (apply above ``@dataclass``) a fast ``__init__`` once it has made :data:`WARM_UP`
    instances; until then the dataclass's own makes them, so importing the class compiles nothing more."""
    if "__slots__" in cls.__dict__:
        raise TypeError(f"{cls.__name__} has __slots__: fast_init stores fields in the instance's __dict__")
    dataclass_init = cls.__dict__["__init__"]
    made = 0  # instances made so far: this class's own count, only ever read here

    @functools.wraps(dataclass_init)
    def warming_up(self: Any, *args: Any, **kwargs: Any) -> None:
        nonlocal made
        made += 1
        if made == WARM_UP and cls.__dict__.get("__init__") is warming_up:
            setattr(cls, "__init__", compiled_init(cls))  # noqa: B010 - replacing the method the dataclass made
        dataclass_init(self, *args, **kwargs)

    setattr(cls, "__init__", warming_up)  # noqa: B010
    return cls


def compiled_init(cls: type) -> Any:
    """The fast ``__init__`` of dataclass ``cls``: same parameters and defaults, fields stored into ``__dict__``."""
    convert: dict[str, Any] = getattr(cls, "_INIT_CONVERT", {})
    namespace: dict[str, Any] = {"_NO_ARGUMENT": _NO_ARGUMENT}
    positional: list[str] = []
    keyword_only: list[str] = []
    body = ["    _fields_of_new_instance = __fast_init_self__.__dict__"]  # names no field of a dataclass would take
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
            value = f"_default_{f.name}"
            param = f"{f.name}=_default_{f.name}"
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            value = f"_factory_{f.name}()"
            param = f"{f.name}=_NO_ARGUMENT"
        else:
            value = ""
            param = f.name
        if f.init:
            (keyword_only if f.kw_only else positional).append(param)
            if f.default_factory is not dataclasses.MISSING:
                value = f"{value} if {f.name} is _NO_ARGUMENT else {f.name}"
            else:
                value = f.name
        elif not value:
            continue  # no init, no default: the dataclass's __init__ leaves it unset too
        if f.name in convert:
            namespace[f"_convert_{f.name}"] = convert[f.name]
            value = f"_convert_{f.name}({value})"
        stored_by = inspect.getattr_static(cls, f.name, None)
        if hasattr(type(stored_by), "__set__"):  # a property (or another data descriptor) keeps the field
            namespace[f"_set_{f.name}"] = stored_by.__set__
            body.append(f"    _set_{f.name}(__fast_init_self__, {value})")
        else:
            body.append(f"    _fields_of_new_instance[{f.name!r}] = {value}")
    if hasattr(cls, "__post_init__"):
        body.append("    __fast_init_self__.__post_init__()")
    params = ", ".join(["__fast_init_self__", *positional, *(["*", *keyword_only] if keyword_only else [])])
    exec(f"def __init__({params}):\n" + "\n".join(body), namespace)  # noqa: S102 - code made from the class's own field names
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    return init
