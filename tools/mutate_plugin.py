"""pytest plugin for tools/mutate.py (loaded with ``-p mutate_plugin``, tools/ on sys.path).

MUTATE_TRACE_OUT=file: record which test executes which line of the files in MUTATE_TRACE_FILES, and
each test's duration, into file (JSON). MUTATE_SELECT=file: run only the test ids listed in file.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import threading
import time
from types import FrameType
from typing import Any

import pytest

_OUTSIDE = "<outside any test>"
_err = sys.__stderr__ or sys.stderr  # progress marks, past pytest's capture
_STARTED: list[_Tracer] = []  # the tracer trace_main() started, handed to the plugin instance pytest makes later


def _start() -> _Tracer:
    tracer = _Tracer(set(os.environ.get("MUTATE_TRACE_FILES", "").split(os.pathsep)) - {""})
    sys.settrace(tracer.global_trace)
    threading.settrace(tracer.global_trace)
    return tracer


def trace_main(args: list[str]) -> int:
    """pytest.main with the tracer already on: pytest imports rnnir (its plugin entry point) before any conftest,
    and module-level code runs once, at that import."""
    _STARTED.append(_start())
    return int(pytest.main(args))


class _Tracer:
    def __init__(self, files: set[str]):
        self.files = files
        self.current = _OUTSIDE
        self.hits: dict[str, dict[int, set[str]]] = {f: {} for f in files}

    def global_trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if frame.f_code.co_filename in self.files:
            self._record(frame)
            return self.local_trace
        return None

    def local_trace(self, frame: FrameType, event: str, arg: Any) -> Any:
        if event == "line":
            self._record(frame)
        return self.local_trace

    def _record(self, frame: FrameType) -> None:
        self.hits[frame.f_code.co_filename].setdefault(frame.f_lineno, set()).add(self.current)


class MutatePlugin:
    def __init__(self) -> None:
        self.out = os.environ.get("MUTATE_TRACE_OUT")
        select = os.environ.get("MUTATE_SELECT")
        self.selected = set(open(select).read().split("\n")) if select else None
        # started by trace_main() before pytest imported rnnir's entry-point plugin, so import-time lines count
        self.tracer = _STARTED[0] if _STARTED else (_start() if self.out else None)
        self.durations: dict[str, float] = {}
        self.tests: list[str] = []

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        if self.selected is None:
            return
        keep = [i for i in items if i.nodeid in self.selected]
        deselected = [i for i in items if i.nodeid not in self.selected]
        if deselected:
            config.hook.pytest_deselected(items=deselected)
        items[:] = keep

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        started = time.perf_counter()
        if self.tracer:
            self.tracer.current = item.nodeid
        yield
        if self.tracer:
            self.tracer.current = _OUTSIDE
        self.durations[item.nodeid] = time.perf_counter() - started
        self.tests.append(item.nodeid)

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        if not self.tracer or not self.out or exitstatus != 0:
            return
        sys.settrace(None)
        threading.settrace(None)
        index = {t: n for n, t in enumerate(self.tests)}
        lines: dict[str, dict[int, object]] = {}
        for file, per_line in self.tracer.hits.items():
            out: dict[int, object] = {}
            for line, who in per_line.items():
                inside = sorted(index[t] for t in who if t in index)
                out[line] = inside if inside else "*"
            lines[file] = out
        with open(self.out, "w") as fh:
            json.dump({"tests": self.tests, "lines": lines, "durations": {t: round(d, 4) for t, d in self.durations.items()}}, fh)


# ---------------------------------------------------------------- fork server (MUTATE_SERVER=jobs.json)


def _swap_code(job: dict[str, Any]) -> int:
    """Give every live function object of the mutated function the mutant's code; returns how many were swapped."""
    import gc
    import types

    import mutate  # tools/ is on sys.path
    from mutate import mutated_code

    fields = {f.name: job[f.name] for f in dataclasses.fields(mutate.Mutant)}
    mutant = mutate.Mutant(**{**fields, "operator": mutate.Operator(job["operator"])})
    module_code = mutated_code(mutant)
    name, first_line = job["function"], job["function_line"]

    def find(code: types.CodeType) -> types.CodeType | None:
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                if const.co_name == name and const.co_firstlineno == first_line:
                    return const
                inner = find(const)
                if inner is not None:
                    return inner
        return None

    new = find(module_code)
    if new is None:
        return 0
    path = str(mutate.ROOT / job["module"])
    swapped = 0
    for obj in gc.get_objects():
        if isinstance(obj, types.FunctionType):
            code = obj.__code__
            if code.co_filename == path and code.co_name == name and code.co_firstlineno == first_line:
                obj.__code__ = new
                swapped += 1
    return swapped


class ForkServer:
    """After collection, run each mutant in a forked child: swap the function's code, run its tests with -x semantics."""

    def __init__(self, jobs_file: str, results_file: str, parallel: int):
        self.jobs = json.loads(open(jobs_file).read())
        self.results_file = results_file
        self.parallel = parallel

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        by_id = {item.nodeid: item for item in session.items}
        running: dict[int, tuple[dict[str, Any], float]] = {}
        queue = list(self.jobs)
        done = 0
        with open(self.results_file, "w") as out:
            while queue or running:
                while queue and len(running) < self.parallel:
                    job = queue.pop(0)
                    items = [by_id[t] for t in job["tests"] if t in by_id]
                    pid = os.fork()
                    if pid == 0:
                        code = 3
                        try:
                            code = self._child(session, job, items)
                        finally:
                            os._exit(code)
                    running[pid] = (job, time.monotonic())
                time.sleep(0.02)
                for pid, (job, started) in list(running.items()):
                    waited, status = os.waitpid(pid, os.WNOHANG)
                    elapsed = time.monotonic() - started
                    if waited == 0 and elapsed < job["budget"]:
                        continue
                    if waited == 0:
                        os.kill(pid, 9)
                        os.waitpid(pid, 0)
                        code = -9
                    else:
                        code = os.waitstatus_to_exitcode(status)
                    del running[pid]
                    out.write(json.dumps({"key": job["key"], "code": code, "seconds": round(elapsed, 2)}) + "\n")
                    out.flush()
                    done += 1
                    mark = {0: "S", 1: ".", 4: "?", -9: "T"}.get(code, "?" if code >= 3 else ".")
                    _err.write(mark if done % 80 else f"{mark} {done}/{len(self.jobs)}\n")
                    _err.flush()
        _err.write("\n")
        return True

    @staticmethod
    def _child(session: pytest.Session, job: dict[str, Any], items: list[pytest.Item]) -> int:
        if not os.environ.get("MUTATE_DEBUG"):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
        if not items:
            return 4
        swapped = _swap_code(job)
        if os.environ.get("MUTATE_DEBUG"):
            print(f"swapped {swapped} function objects for {job['key']}", flush=True)
        if swapped == 0:
            return 4  # the function is not live in this process: the caller runs it another way
        for i, item in enumerate(items):
            nextitem = items[i + 1] if i + 1 < len(items) else None
            item.config.hook.pytest_runtest_protocol(item=item, nextitem=nextitem)
            if session.testsfailed:
                return 1
        return 0


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(MutatePlugin(), "mutate-plugin-instance")
    jobs = os.environ.get("MUTATE_SERVER")
    if jobs:
        config.pluginmanager.register(ForkServer(jobs, os.environ["MUTATE_RESULTS"], int(os.environ.get("MUTATE_PARALLEL", "2"))), "mutate-fork-server")
