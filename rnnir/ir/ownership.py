"""How IR elements belong to a program: the immutable containers, and the writes a program sees or refuses.

The IR is immutable from outside: its containers are :class:`IRTuple` s, and slots, outputs, nodes and values
(:class:`Owned`) tell the program they were added to about every write of theirs, so that its version moves
(every cached analysis is keyed by it) or, while an analysis has the program frozen, the write is refused.
"""

from __future__ import annotations

from typing import Any, NoReturn, Protocol

from rnnir.errors import IRError

__all__ = ["EDIT_THROUGH_PROGRAM", "FrozenProgramError", "IRTuple", "ImmutableIRError", "Owned", "ProgramOwner", "write_kept"]


class FrozenProgramError(IRError):
    """Something tried to change a program while an analysis had it frozen (analyses never mutate the IR)."""


EDIT_THROUGH_PROGRAM = (
    "rnnir IR containers are immutable tuples, so that no edit escapes the program's version (which keys every "
    "cached analysis): edit through the Program (set_input, set_output, replace_all_uses_with, add, ...)"
)


class ImmutableIRError(IRError, TypeError):
    """An in-place write to an IR container (a TypeError, as for any tuple, that says what to call instead)."""


class IRTuple(tuple):  # type: ignore[type-arg]  # holds Values, use pairs, slots...: typed by the fields that hold it
    """The immutable container of the IR (operands, results, use lists, slots, outputs, state pairs).

    A plain tuple would refuse ``node.inputs[0] = v`` too; this one says why and what to call instead.
    """

    __slots__ = ()

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise ImmutableIRError(EDIT_THROUGH_PROGRAM)

    __setitem__ = __delitem__ = __iadd__ = _refuse
    append = extend = insert = remove = pop = clear = sort = reverse = _refuse


class ProgramOwner(Protocol):
    """What an element knows of the program that owns it (:class:`rnnir.ir.core.Program`, which this module
    cannot import: the program is made of the elements)."""

    @property
    def name(self) -> str: ...

    @property
    def is_frozen(self) -> bool: ...

    def _changed(self) -> None: ...


class Owned:
    """Slots, outputs, nodes and values know the program they were added to: while that program is frozen (an
    analysis pass is running) writing one of their attributes raises :class:`FrozenProgramError`, and any other
    write bumps the program's version, so cached analyses never outlive an edit made behind the Program's back.
    Their containers are :class:`IRTuple` s: an in-place write raises instead of going unseen."""

    def __setattr__(self, name: str, value: Any) -> None:
        program: ProgramOwner | None = self.__dict__.get("_program")
        if program is not None:
            if program.is_frozen:
                raise FrozenProgramError(f"{self!r}.{name} written while program {program.name!r} is frozen for analysis")
            program._changed()
        object.__setattr__(self, name, value)

    def _adopt(self, program: ProgramOwner) -> None:
        object.__setattr__(self, "_program", program)


def write_kept(obj: object, name: str, value: object) -> None:
    """The program's own write of a field it keeps (use-def links, operands), which owned elements refuse from
    anyone else; the program counts the change itself."""
    object.__setattr__(obj, name, value)
