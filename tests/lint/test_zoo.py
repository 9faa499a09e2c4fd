"""Zoo scale: ``rnnir.lint_many`` with any Executor (threads, processes, dask.distributed), results equal
to a serial run and in input order, and ``--shard I/N`` for CI job matrices.

Oracle for the findings: each sample's ``*.expected.json`` (written from its construction, not by rnnir).
"""

from __future__ import annotations

import json
from collections import Counter
from concurrent.futures import Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor
from pathlib import Path

import pytest

import rnnir
from rnnir import cli
from rnnir.lint.zoo import Shard, ShardError

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "samples"
MODELS = sorted(str(p) for p in [*SAMPLES.glob("*.onnx"), *SAMPLES.glob("*.rnnir")])


def expected_codes(path: str) -> Counter[str]:
    doc = json.loads(Path(path).with_suffix("").with_suffix(".expected.json").read_text(encoding="utf-8"))
    return Counter(f["code"] for f in doc["findings"])


def codes(result) -> Counter[str]:
    return Counter(d.code for d in result.diagnostics)


@pytest.fixture(scope="module")
def serial():
    return rnnir.lint_many(MODELS, max_workers=1)


def test_serial_results_match_the_samples_expectations(serial):
    assert [r.path for r in serial] == MODELS
    for r in serial:
        assert r.error is None, r.error
        assert codes(r) == expected_codes(r.path), r.path


def test_thread_pool_gives_the_serial_results_in_input_order(serial):
    shuffled = MODELS[::-1]  # input order is kept, whatever it is
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = rnnir.lint_many(shuffled, executor=pool)
    assert [r.path for r in results] == shuffled
    assert results == serial[::-1]


def test_process_pool_gives_the_serial_results(serial):
    with ProcessPoolExecutor(max_workers=2) as pool:
        results = rnnir.lint_many(MODELS, executor=pool)
        assert pool.submit(int, "3").result() == 3  # the caller's executor is left running
    assert results == serial


def test_default_executor_is_a_process_pool_and_gives_the_serial_results(serial):
    assert rnnir.lint_many(MODELS, max_workers=1000) == serial  # clamped to the CPUs, not 1000 processes


def test_folders_expand_like_the_command_and_errors_stay_in_place(tmp_path, serial):
    (tmp_path / "empty").mkdir()
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    results = rnnir.lint_many([str(junk), str(SAMPLES), str(tmp_path / "empty")], max_workers=1)
    assert results[0].path == str(junk) and results[0].error["type"] == "ModelError"
    assert results[1:-1] == serial
    assert results[-1].error["type"] == "NoModelsFound"


def test_select_and_ignore_apply(serial):
    chain = str(SAMPLES / "al001_chain.rnnir")
    assert codes(rnnir.lint_many([chain], select=["AL"])[0]) == Counter({"AL001": 1})
    assert codes(rnnir.lint_many([chain], ignore=["al001"])[0]) == Counter()
    with pytest.raises(ValueError, match="select: unknown rule code, prefix or name 'XX'; known codes: AL001"):
        rnnir.lint_many([chain], select=["XX"])
    with pytest.raises(ValueError, match="ignore: unknown rule code, prefix or name 'ZZ9'"):
        rnnir.lint_many([chain], ignore=["SD", "zz9"])


class LosingExecutor(Executor):
    """An executor whose every second task is lost, as when a cluster worker dies."""

    def __init__(self) -> None:
        self.n = 0

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        future: Future = Future()
        self.n += 1
        if self.n % 2 == 0:
            future.set_exception(ConnectionError("worker tcp://10.0.0.7 lost"))
        else:
            future.set_result(fn(*args, **kwargs))
        return future


def test_a_lost_task_is_that_models_error_and_the_others_are_linted(serial):
    results = rnnir.lint_many(MODELS[:4], executor=LosingExecutor())
    assert results[0] == serial[0] and results[2] == serial[2]
    assert results[1].error["type"] == "InternalError" and "worker tcp://10.0.0.7 lost" in results[1].error["message"]


def test_dask_distributed_local_cluster(serial):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        with distributed.Client(cluster) as client:
            results = rnnir.lint_many(MODELS, executor=client.get_executor())
    assert results == serial


# -- shards ----------------------------------------------------------------------------------


def test_shards_partition_the_zoo(serial):
    shards = [rnnir.lint_many(MODELS, max_workers=1, shard=Shard(i, 4)) for i in range(1, 5)]
    paths = [r.path for s in shards for r in s]
    assert sorted(paths) == MODELS and len(paths) == len(set(paths))  # each model in exactly one shard
    assert max(map(len, shards)) - min(map(len, shards)) <= 1  # dealt evenly
    assert shards[1] == serial[1::4]  # round-robin in sorted order


@pytest.mark.parametrize("text", ["0/3", "4/3", "1", "a/b", "1/0", "-1/2"])
def test_bad_shard_is_a_usage_error(capsys, text):
    with pytest.raises(ShardError):
        Shard.parse(text)
    assert cli.main(["lint", "--no-config", str(SAMPLES), f"--shard={text}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("rnnir: error: --shard takes I/N") and err.count("\n") == 1


def test_lint_shard_flag_lints_the_shards_models(capsys, serial):
    union: list[str] = []
    for i in (1, 2, 3):
        code = cli.main(["lint", "--no-config", str(SAMPLES), "--shard", f"{i}/3", "--format", "json"])
        doc = json.loads(capsys.readouterr().out)
        shard_paths = [f["path"] for f in doc["files"]]
        assert shard_paths == [r.path for r in serial[i - 1 :: 3]]
        assert code == (1 if any(r.diagnostics and any(d.severity.value == "error" for d in r.diagnostics) for r in serial[i - 1 :: 3]) else 0)
        union += shard_paths
    assert sorted(union) == MODELS
