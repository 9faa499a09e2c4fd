"""Exposing a recurrence's hidden state (``rnnir fix --expose-state``, and SD010's fix): each planned state gets a
graph input wired to the op's initial-state port and a graph output of its final state (through If branches),
and the pairs are recorded in the model's metadata.  The plans come from :mod:`rnnir.fixes.state_plan`."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import helper, numpy_helper

from rnnir.fixes.edits import EXPOSE, Edit, FixError, FixResult
from rnnir.fixes.onnx_edit import Names, name_stem, node_label, prune, record_pairs, type_text
from rnnir.fixes.state_plan import Alternative, StatePlan, plan_states
from rnnir.lower import Policy, lower
from rnnir.lower.pairing import _name_candidates
from rnnir.onnxio.source import read_model

__all__ = ["expose", "lift_final"]


def expose(model: onnx.ModelProto, result: FixResult, *, packed: bool, defaults: bool, pairs: Mapping[str, str | None] | None, label: str) -> None:
    """Expose every hidden state of ``model`` in place (``packed``: one ``state`` tensor; ``defaults``: a same-name
    initializer as each new input's default; see :mod:`rnnir.fixes.engine`): the edits go to ``result.edits``, the
    states it cannot expose, and why, to ``result.skipped``."""
    program = lower(read_model(model, label=label), pairs, Policy())
    before_pairs = {p.input: p.output for p in program.state_pairs}
    plans = plan_states(model, program, result.skipped, defaults)
    if not plans:
        return
    if not defaults:
        for plan in plans:
            plan.default = None
    names = Names(model)
    front: list[onnx.NodeProto] = []
    back: list[onnx.NodeProto] = []
    old_inits: set[str] = set()
    new_pairs: dict[str, str] = {}
    finals: list[str] = []
    if packed:
        if any(p.layout != 0 or len(p.shape) != 3 for p in plans):
            raise FixError(f"{label}: --packed needs every exposed op in layout 0 (state [directions, batch, hidden], not a cell's [batch, hidden]); expose them separately")
        if len({(p.dtype, tuple(p.shape[1:])) for p in plans}) != 1:
            raise FixError(f"{label}: --packed needs every exposed state of one dtype and shape [1, batch, hidden]; expose them separately")
        state_in = "state" if names.free("state") and names.free("stateN") else names.fresh("rnn_state")
        state_out = state_in + "N"
        names.used.update({state_in, state_out})
        shape = [len(plans), *plans[0].shape[1:]]
        default = None
        if all(p.default is not None for p in plans):
            default = np.concatenate([p.default for p in plans if p.default is not None], axis=0)
        add_state_input(model, state_in, plans[0].dtype, shape, default)
        for k, plan in enumerate(plans):
            inner = names.fresh(f"{state_in}_{k}_{plan.role}")
            starts, ends, axes = (names.fresh(f"{inner}_{s}") for s in ("start", "end", "axis"))
            for nm, v in ((starts, k), (ends, k + 1), (axes, 0)):
                model.graph.initializer.append(numpy_helper.from_array(np.array([v], np.int64), nm))
            front.append(helper.make_node("Slice", [state_in, starts, ends, axes], [inner], name=names.fresh(f"fix_expose_slice_{k}")))
            old_inits.update(wire_initial(plan, inner))
            finals.append(lift_final(model, plan, inner, names))
        back.append(helper.make_node("Concat", finals, [state_out], name=names.fresh("fix_expose_concat_state"), axis=0))
        model.graph.output.append(helper.make_tensor_value_info(state_out, plans[0].dtype, shape))
        new_pairs[state_in] = state_out
        result.edits.append(
            Edit(
                EXPOSE,
                f"graph input {state_in!r} / output {state_out!r}",
                "; ".join(f"{p.what} initial_{p.role}: {p.alternatives[0].before}" for p in plans) + "; final states not returned",
                ", ".join(f"{state_in}[{k}] = {p.role} of {p.what}" for k, p in enumerate(plans)),
                True,
                f"exposed packed state {type_text(plans[0].dtype, shape)} {default_text(default, shape)}",
            )
        )
    else:
        multi = len({p.label for p in plans}) > 1
        for plan in plans:
            stem = f"{name_stem(plan.label)}_" if multi else ""
            want_in, want_out = f"{stem}{plan.role}0", f"{stem}{plan.role}n"
            returned = returned_output(model, plan, set(before_pairs.values()))
            paired_in = input_name_for(returned, names) if returned is not None else None
            reused = returned is not None and paired_in is not None
            if returned is not None and paired_in is not None:
                state_in, state_out = paired_in, returned  # the model already returns the final state: pair it
                names.used.add(state_in)
            elif names.free(want_in) and names.free(want_out):
                state_in, state_out = want_in, want_out
                names.used.update({state_in, state_out})
            else:
                state_in = names.fresh(f"{name_stem(plan.label)}_{plan.role}0")
                state_out = names.fresh(state_in[:-1] + "n")
            add_state_input(model, state_in, plan.dtype, plan.shape, plan.default)
            old_inits.update(wire_initial(plan, state_in))
            if not reused:
                final = lift_final(model, plan, state_in, names)
                back.append(helper.make_node("Identity", [final], [state_out], name=names.fresh(f"fix_expose_{state_out}")))
                model.graph.output.append(helper.make_tensor_value_info(state_out, plan.dtype, plan.shape))
            new_pairs[state_in] = state_out
            result.edits.append(
                Edit(
                    EXPOSE,
                    f"{plan.what} initial_{plan.role} / {'Y_h' if plan.role == 'h' else 'Y_c'}",
                    f"initial state {plan.alternatives[0].before}, final state " + (f"returned as {state_out!r} but not paired" if reused else "not returned"),
                    f"graph input {state_in!r} {type_text(plan.dtype, plan.shape)} {default_text(plan.default, plan.shape)}, "
                    + (f"paired with the returned {state_out!r}" if reused else f"graph output {state_out!r}"),
                    True,
                    f"exposed the {plan.role} state of {plan.what}",
                )
            )
    for k, node in enumerate(front):  # they read only graph inputs and initializers: first in the graph
        model.graph.node.insert(k, node)
    model.graph.node.extend(back)
    removed = prune(model, old_inits)
    if removed:
        result.edits.append(Edit(EXPOSE, "former initial states", ", ".join(removed), "removed (nothing reads them)", True, "dropped the constant initial states"))
    record_pairs(model, {**before_pairs, **new_pairs}, label)


def returned_output(model: onnx.ModelProto, plan: StatePlan, paired: set[str | None]) -> str | None:
    """The main-graph output that already returns the plan's final state as it is (directly or through Identity)."""
    if len(plan.alternatives) != 1 or plan.alternatives[0].graph.owners or not plan.alternatives[0].final:
        return None
    final = plan.alternatives[0].final
    outs = {o.name for o in model.graph.output} - paired
    if final in outs:
        return final
    for n in model.graph.node:
        if n.op_type == "Identity" and list(n.input) == [final] and n.output[0] in outs:
            return str(n.output[0])
    return None


def input_name_for(output: str, names: Names) -> str | None:
    """A free input name that rnnir's naming convention pairs with ``output`` (hn -> h0, stateN -> state, ...)."""
    cands: list[str] = []
    m = re.fullmatch(r"(.*)([hc])([._]?)(n|N|out)", output)
    if m:
        cands.append(f"{m.group(1)}{m.group(2)}{m.group(3)}0")
    for old, new in (("N", ""), ("_out", "_in"), ("_out", ""), ("_final", "")):
        if output.endswith(old) and len(output) > len(old):
            cands.append(output[: -len(old)] + new)
    for old, new in (("new_", ""), ("next_", ""), ("present_", "past_"), ("out_", "in_")):
        if output.startswith(old):
            cands.append(new + output[len(old) :])
    cands.append(f"{output}_prev")
    for c in cands:
        if names.free(c) and output in _name_candidates(c):
            return c
    return None


def default_text(default: np.ndarray | None, shape: Sequence[int | str | None]) -> str:
    if default is None:
        return "(required: feed zeros on the first call; StatefulSession does)"
    return "(default: zeros)" if not np.any(default) else "(default: the op's former constant initial state)"


def add_state_input(model: onnx.ModelProto, name: str, dtype: int, shape: Sequence[int | str | None], default: np.ndarray | None) -> None:
    model.graph.input.append(helper.make_tensor_value_info(name, dtype, list(shape)))
    if default is not None:
        np_type = helper.tensor_dtype_to_np_dtype(dtype)
        model.graph.initializer.append(numpy_helper.from_array(default.astype(np_type), name))
        if model.ir_version < 4:
            model.ir_version = 4  # an initializer is an overridable default only from IR version 4 on


def wire_initial(plan: StatePlan, value: str) -> list[str]:
    """Point every alternative's initial-state port at ``value`` (a main-graph name, visible in every branch)."""
    old: list[str] = []
    for alt in plan.alternatives:
        for node, index in alt.sites:
            while len(node.input) <= index:
                node.input.append("")
            if node.input[index]:
                old.append(node.input[index])
            node.input[index] = value
    return old


def final_name(alt: Alternative, names: Names) -> str:
    if alt.final:
        return alt.final
    node = alt.final_node
    while len(node.output) <= alt.final_index:
        node.output.append("")
    node.output[alt.final_index] = names.fresh(f"{name_stem(node_label(node))}_Y_{'h' if alt.final_index == 1 else 'c'}")
    alt.final = node.output[alt.final_index]
    return alt.final


def lift_final(model: onnx.ModelProto, plan: StatePlan, passthrough: str, names: Names) -> str:
    """The main-graph name of the state's final value.

    Each enclosing If gets one more output: the branch that computes the state yields its final value,
    the other branch yields the other alternative's final value (ops grouped across the two branches)
    or ``passthrough``, the incoming state, handed back unchanged.
    """
    finals = {id(alt.graph.graph): final_name(alt, names) for alt in plan.alternatives}
    first = plan.alternatives[0]
    value = finals[id(first.graph.graph)]
    owners = first.graph.owners
    while owners:
        if_node, branch = owners[-1]
        out_name = names.fresh(f"{name_stem(node_label(if_node))}_{plan.role}_final")
        for a in if_node.attribute:
            if a.type != onnx.AttributeProto.GRAPH:
                continue
            yielded = value if a.name == branch else finals.get(id(a.g), passthrough)
            y = names.fresh(f"{out_name}_{a.name}")
            a.g.node.append(helper.make_node("Identity", [yielded], [y], name=names.fresh(f"fix_expose_{y}")))
            a.g.output.append(helper.make_tensor_value_info(y, plan.dtype, plan.shape))
        if_node.output.append(out_name)
        value = out_name
        owners = owners[:-1]
    return value
