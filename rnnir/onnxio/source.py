"""Reading an ONNX model safely: every way a file can be bad becomes a ModelError.

Weights stored as external data are *not* loaded here (linting needs none of
them); their paths are checked, and :meth:`ModelSource.with_external_data`
loads them when a runtime or an export needs the bytes.  A path that leaves
the model's folder is refused and never opened.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import compress
from pathlib import Path
from typing import TYPE_CHECKING, Union

from google.protobuf.message import DecodeError

from rnnir.errors import ModelError
from rnnir.onnxio.proto import ATTR, EXTERNAL, messages
from rnnir.util.regularfile import UnreadableFile, file_kind, read_regular

if TYPE_CHECKING:
    import onnx

ModelLike = Union[str, os.PathLike[str], bytes, "onnx.ModelProto"]  # noqa: UP007 - a runtime alias: X | Y needs 3.10 types that os.PathLike is not

# onnx.load reads the whole file; refuse absurd sizes before protobuf does (its hard limit is 2 GiB).
_MAX_PROTO_BYTES = 2**31 - 1


@dataclass(frozen=True)
class NodeTable:
    """The nodes of one graph and each one's ``(op_type, domain)``, read from protobuf once (a microsecond a field:
    a tenth of a second on 100k nodes) for both readers of the main graph, the external-data check and lowering."""

    nodes: list[onnx.NodeProto]
    keys: list[tuple[str, str]]

    @functools.cached_property
    def kinds(self) -> dict[tuple[str, str], None]:
        """Each ``(op_type, domain)`` once, in the order they first appear: made once for both readers (a pass over
        100k keys costs as much as reading a field)."""
        return dict.fromkeys(self.keys)

    @classmethod
    def of(cls, graph: onnx.GraphProto) -> NodeTable:
        nodes = list(graph.node)
        return cls(nodes, [(n.op_type, n.domain) for n in nodes])


@dataclass
class ModelSource:
    """A parsed model and where it came from."""

    model: onnx.ModelProto
    path: Path | None
    label: str
    _fingerprint: str | None = field(default=None, repr=False)
    # the main graph's nodes as read_model read them, for the first lowering (see take_main_nodes)
    _main_nodes: NodeTable | None = field(default=None, repr=False, compare=False)

    def take_main_nodes(self) -> NodeTable | None:
        """The main graph's :class:`NodeTable` as read_model read it, once: the lowering that follows reading uses it
        instead of reading every node again; later callers (the model may have been edited since) get None."""
        table, self._main_nodes = self._main_nodes, None
        return table

    @property
    def base_dir(self) -> Path | None:
        return None if self.path is None else self.path.parent

    @property
    def has_external_data(self) -> bool:
        return any(_is_external(t) for t in iter_tensors(self.model))

    @property
    def fingerprint(self) -> str:
        """sha256 of the graph (not of metadata), so a re-export with new metadata keeps its fingerprint."""
        if self._fingerprint is None:
            self._fingerprint = graph_fingerprint(self.model)
        return self._fingerprint

    def with_external_data(self) -> onnx.ModelProto:
        """A copy of the model with external tensors loaded from beside the file (paths already checked)."""
        if not self.has_external_data:
            return self.model
        if self.base_dir is None:
            raise ModelError(
                "the model keeps weights in external data files, but it was given as bytes or a ModelProto; "
                "pass the .onnx path so the data files beside it can be found",
                model=self.label,
            )
        import onnx  # the external-data loader is onnx's: only a runtime or an export pays for the import

        model = onnx.ModelProto()
        model.CopyFrom(self.model)
        try:
            onnx.external_data_helper.load_external_data_for_model(model, str(self.base_dir))
        except (OSError, ValueError, onnx.checker.ValidationError) as exc:
            raise ModelError(f"cannot read external data: {exc}", model=self.label) from None
        return model


def graph_fingerprint(model: onnx.ModelProto) -> str:
    import hashlib  # export, fix and saved states need fingerprints; linting does not

    h = hashlib.sha256()
    h.update(model.graph.SerializeToString(deterministic=True))
    for op in model.opset_import:
        h.update(f"{op.domain}:{op.version};".encode())
    return h.hexdigest()


_SUBGRAPH_OPS = frozenset({"If", "Loop", "Scan", "SequenceMap"})
# standard ops with a tensor attribute (Constant.value/sparse_value, ConstantOfShape.value)
_TENSOR_ATTR_OPS = frozenset({"Constant", "ConstantOfShape"})


def _attr_holders(graph: onnx.GraphProto, table: NodeTable | None = None) -> Iterator[onnx.NodeProto]:
    """The nodes of ``graph`` (whose nodes ``table`` holds, when given) that may hold subgraphs or tensors as
    attributes: in practice only these do, and skipping the rest keeps big graphs cheap.  Decided once per
    (op_type, domain): on 100k nodes a Python call per node costs as much as reading the two fields, so the filter
    itself runs in C."""
    if table is None:
        nodes, keys = graph.node, [(n.op_type, n.domain) for n in graph.node]
        kinds: Iterable[tuple[str, str]] = set(keys)
    else:
        nodes, keys, kinds = table.nodes, table.keys, table.kinds
    holders = {k for k in kinds if k[0] in _SUBGRAPH_OPS or k[0] in _TENSOR_ATTR_OPS or k[1] not in ("", "ai.onnx")}
    if not holders:
        return iter(())
    return compress(nodes, map(holders.__contains__, keys))


def iter_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every subgraph below it (If/Loop/Scan bodies), depth first."""
    stack = [graph]
    while stack:
        g = stack.pop()
        yield g
        for node in _attr_holders(g):
            for attr in node.attribute:
                if attr.type == ATTR.GRAPH:
                    stack.append(attr.g)
                elif attr.type == ATTR.GRAPHS:
                    stack.extend(attr.graphs)


def iter_tensors(model: onnx.ModelProto, main_nodes: NodeTable | None = None) -> Iterator[onnx.TensorProto]:
    """Every tensor that may keep its bytes in an external file: initializers, both halves of sparse
    tensors (values and indices), and tensor attributes (Constant, ConstantOfShape, custom ops).

    Graphs in :func:`iter_graphs`'s order, walked once: the nodes of a 100k-node graph cost a tenth of a
    second to visit from Python, so subgraphs are found in the same pass as tensor attributes.  ``main_nodes``:
    the main graph's nodes, read already.
    """
    stack = [model.graph]
    table = main_nodes
    while stack:
        g = stack.pop()
        yield from g.initializer
        for s in g.sparse_initializer:
            yield s.values
            yield s.indices
        holders = _attr_holders(g, table)
        table = None  # the main graph's: a subgraph's nodes are read as it comes
        for node in holders:
            for attr in node.attribute:
                kind = attr.type
                if kind == ATTR.TENSOR:
                    yield attr.t
                elif kind == ATTR.TENSORS:
                    yield from attr.tensors
                elif kind == ATTR.SPARSE_TENSOR:
                    yield attr.sparse_tensor.values
                    yield attr.sparse_tensor.indices
                elif kind == ATTR.SPARSE_TENSORS:
                    for st in attr.sparse_tensors:
                        yield st.values
                        yield st.indices
                elif kind == ATTR.GRAPH:
                    stack.append(attr.g)
                elif kind == ATTR.GRAPHS:
                    stack.extend(attr.graphs)


def _is_external(t: onnx.TensorProto) -> bool:
    return t.data_location == EXTERNAL


def _check_external_paths(model: onnx.ModelProto, base_dir: Path | None, label: str, main_nodes: NodeTable | None = None) -> None:
    root = None if base_dir is None else base_dir.resolve()
    for t in iter_tensors(model, main_nodes):
        if not _is_external(t):
            continue
        entries = {e.key: e.value for e in t.external_data}
        loc = entries.get("location", "")
        where = f"tensor {t.name!r}"
        if not isinstance(loc, str) or not all(isinstance(k, str) and isinstance(v, str) for k, v in entries.items()):
            raise ModelError("external data entry is not valid UTF-8 text", model=label, where=where)
        if not loc:
            raise ModelError("external data entry without a location", model=label, where=where)
        if "\0" in loc:
            raise ModelError(f"external data path {loc!r} holds a NUL byte; no file has such a name", model=label, where=where)
        p = Path(loc)
        if not p.parts or p.parts[-1] in (".", ".."):
            raise ModelError(f"external data path {loc!r} names a folder, not a data file", model=label, where=where)
        if p.is_absolute() or loc.startswith(("/", "\\")) or ":" in p.parts[0]:
            raise ModelError(
                f"external data path {loc!r} is absolute; rnnir only reads data files inside the model's folder",
                model=label,
                where=where,
            )
        if root is not None:
            try:
                target = (root / p).resolve()
            except (OSError, RuntimeError, ValueError) as exc:  # a symlink loop, a name the OS refuses
                raise ModelError(f"external data path {loc!r} cannot be resolved: {exc}", model=label, where=where) from None
            if target == root or root not in target.parents:
                raise ModelError(
                    f"external data path {loc!r} leaves the model's folder {str(root)!r}; refusing to follow it",
                    model=label,
                    where=where,
                )
            _check_data_file(target, loc, label, where)
        elif ".." in p.parts:
            raise ModelError(f"external data path {loc!r} climbs out of the model's folder", model=label, where=where)
        for key in ("offset", "length"):
            if key in entries:
                try:
                    if int(entries[key]) < 0:
                        raise ValueError
                except ValueError:
                    raise ModelError(f"external data {key} {entries[key]!r} is not a non-negative integer", model=label, where=where) from None


def _check_data_file(target: Path, loc: str, label: str, where: str) -> None:
    """An external data file that exists must be a regular file: a FIFO would block a reader, /dev/zero never ends.

    A missing file is not an error here: linting never reads the bytes, and loading them says so.
    """
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise ModelError(f"external data path {loc!r} cannot be examined: {exc.strerror or exc}", model=label, where=where) from None
    kind = file_kind(mode)
    if kind is not None:
        raise ModelError(f"external data path {loc!r} is {kind}, not a regular file; refusing to read it", model=label, where=where)


def read_regular_file(path: Path, label: str, limit: int = _MAX_PROTO_BYTES) -> bytes:
    """The bytes of ``path``, which must be a regular file of at most ``limit`` bytes
    (:func:`rnnir.util.regularfile.read_regular`, its refusals as :class:`ModelError`)."""
    try:
        return read_regular(path, limit, limit_hint="save weights as external data", regular_only="only regular files are read as models")
    except UnreadableFile as exc:
        message = "is a folder, not an .onnx file" if exc.kind == "a folder" else str(exc)
        raise ModelError(message, model=label) from None


def read_model(model: ModelLike, *, label: str | None = None) -> ModelSource:
    """Parse ``model`` (a path, the file's bytes, or a ModelProto) into a :class:`ModelSource`."""
    path: Path | None = None
    if isinstance(model, messages().ModelProto):
        proto = model
        label = label or (model.graph.name or "<ModelProto>")
    elif isinstance(model, (bytes, bytearray, memoryview)):
        proto = _parse(bytes(model), label or "<bytes>")
        label = label or "<bytes>"
    elif isinstance(model, (str, os.PathLike)):
        path = Path(model)
        label = label or str(path)
        if path.suffix.lower() == ".rnnir":  # as rnnir.irtext.is_ir_text, without importing the IR text parser
            raise ModelError("is IR text (a program, no ONNX graph to run or edit); rnnir.load, rnnir lint and rnnir show read it, "
                             "rnnir.export(rnnir.load(path)) makes an ONNX model of it", model=label)
        proto = _parse(read_regular_file(path, label), label)
    else:
        raise ModelError(f"expected a path, bytes or onnx.ModelProto, got {type(model).__name__}")
    _check_shape(proto, label)
    main_nodes = NodeTable.of(proto.graph)
    _check_external_paths(proto, None if path is None else path.parent, label, main_nodes)
    return ModelSource(model=proto, path=path, label=label, _main_nodes=main_nodes)


def _parse(data: bytes, label: str) -> onnx.ModelProto:
    if not data:
        raise ModelError("file is empty", model=label)
    proto: onnx.ModelProto = messages().ModelProto()
    try:
        proto.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ModelError(f"not a readable ONNX model (truncated or not ONNX at all): {exc}", model=label) from None
    return proto


def _check_shape(proto: onnx.ModelProto, label: str) -> None:
    """Catch protobufs that parsed but are no ONNX model (random bytes often parse as *something*)."""
    if proto.ir_version <= 0 or not proto.HasField("graph"):
        raise ModelError("not an ONNX model: no ir_version or no graph (truncated file, or another format)", model=label)
    if not proto.opset_import:
        raise ModelError("not a usable ONNX model: it imports no opset", model=label)
    if len(proto.graph.output) == 0:
        raise ModelError("the graph has no outputs (truncated file?)", model=label)
    for entry in proto.metadata_props:  # protobuf hands back bytes for text that is not UTF-8
        if type(entry.key) is not str or type(entry.value) is not str:
            raise ModelError(f"metadata entry {entry.key!r} is not valid UTF-8 text, as ONNX requires", model=label, where="metadata_props")
    for op in proto.opset_import:
        if type(op.domain) is not str:
            raise ModelError(f"opset domain {op.domain!r} is not valid UTF-8 text", model=label, where="opset_import")
