"""Hostile and malformed snapshots through the real `kai simulate`: each class the fuzzer found ends in a
message naming the object (or file) and the field (or position), never in an internal error or a signal."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.scenario import NOW, node, pod, podgroup, queue, run_cli, write


def simulate(
    tmp_path: Path, objects: list[dict[str, Any]] | None = None, data: bytes | None = None
) -> tuple[int, str, str]:
    path = tmp_path / "snap.yaml"
    if data is not None:
        path.write_bytes(data)
    else:
        write(objects or [], tmp_path, "snap.yaml")
    done = run_cli(["simulate", "-f", str(path), "--now", NOW, "-o", "json"])
    assert done.returncode in (0, 1), (done.returncode, done.stderr[-500:])  # 70 = internal error, <0 = signal
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    return done.returncode, done.stdout, done.stderr


def refused(tmp_path: Path, objects: list[dict[str, Any]] | None = None, data: bytes | None = None) -> str:
    code, stdout, stderr = simulate(tmp_path, objects, data)
    assert code == 1 and stdout == "", stderr
    return stderr


def base() -> list[dict[str, Any]]:
    return [node("n1", gpus=2), queue("q"), pod("p", queue="q", gpus=1)]


# -- the file: encoding, depth, size -------------------------------------------------------------------------


def test_invalid_utf8_names_file_and_position(tmp_path: Path) -> None:
    err = refused(tmp_path, data=b"apiVersion: v1\nkind: Node\nmetadata: {name: n\xff1}\n")
    assert "snap.yaml: byte 44 (line 3, column 19): is not valid UTF-8" in err


def test_yaml_nested_50000_deep_is_refused_not_a_segfault(tmp_path: Path) -> None:
    err = refused(
        tmp_path, data=b"apiVersion: v1\nkind: Node\nmetadata: {name: n}\nspec: " + b"[" * 50_000 + b"]" * 50_000
    )
    assert "snap.yaml: line 4, column" in err and "is nested more than 256 levels deep" in err


def test_block_sequence_chain_and_json_nesting(tmp_path: Path) -> None:
    assert "is nested more than 256 levels deep" in refused(tmp_path, data=b"- " * 50_000 + b"x\n")
    assert "is nested more than 256 levels deep" in refused(tmp_path, data=b'{"a": ' * 3000 + b"1" + b"}" * 3000)


def test_aliases_nesting_deeper_than_the_text(tmp_path: Path) -> None:
    text = "a0: &a0 [x]\n" + "".join(f"a{i}: &a{i} [*a{i - 1}]\n" for i in range(1, 1500))
    assert "is nested more than 256 levels deep (aliases)" in refused(tmp_path, data=text.encode())


def test_list_whose_items_is_not_a_list(tmp_path: Path) -> None:
    err = refused(tmp_path, data=b"apiVersion: v1\nkind: List\nitems: 5\n")
    assert "snap.yaml: document 1 items: must be a list of objects" in err


# -- fields of the wrong type ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("index", "path", "value", "expected"),
    [
        (0, ("metadata",), ["n1"], "Node <unnamed>: metadata: must be a map with a name, got a list"),
        (0, ("metadata", "labels"), "gpu=yes", "Node n1: metadata.labels: must be a map, got a str"),
        (2, ("spec",), "run", "Pod ns/p: spec: must be a map, got a str"),
        (2, ("spec", "containers"), 3, "Pod ns/p: spec.containers: must be a list, got a number"),
        (
            2,
            ("spec", "containers", 0, "resources", "requests"),
            ["cpu"],
            "Pod ns/p: spec.containers[0].resources.requests: must be a map of resource name to quantity, got a list",
        ),
        (2, ("spec", "affinity"), "anywhere", "Pod ns/p: spec.affinity: must be a map, got a str"),
        (2, ("metadata", "annotations"), 7, "Pod ns/p: metadata.annotations: must be a map, got a number"),
        (0, ("status", "conditions"), ["Ready"], "Node n1: status.conditions[0]: must be a map, got a str"),
        (1, ("spec", "resources", "gpu"), [1], "Queue q: spec.resources.gpu: must be a map with quota"),
    ],
)
def test_wrong_types_name_object_and_field(tmp_path: Path, index: int, path: tuple, value: Any, expected: str) -> None:
    objects = base()
    target = objects[index]
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert expected in refused(tmp_path, objects)


def test_value_nested_3000_deep_in_a_field_is_shown_short(tmp_path: Path) -> None:
    objects = base()
    deep: Any = 1
    for _ in range(200):  # YAML's own emitter cannot write deeper; the text below is deeper still
        deep = [deep]
    objects[1]["spec"]["resources"]["gpu"]["quota"] = "@@DEEP@@"
    text = write(objects, tmp_path, "x.yaml").read_text().replace("'@@DEEP@@'", "[" * 250 + "]" * 250)
    err = refused(tmp_path, data=text.encode())
    assert "Queue q: spec.resources.gpu.quota: must be a number, got [[[[...]]]]" in err


def test_names_yaml_reads_as_numbers_or_dates_are_their_string_form(tmp_path: Path) -> None:
    objects = base()
    objects[0]["metadata"]["name"] = "@@NODE@@"
    objects[2]["metadata"]["name"] = "@@POD@@"
    objects[2]["metadata"]["labels"]["team"] = "@@LABEL@@"
    text = write(objects, tmp_path, "x.yaml").read_text()
    text = text.replace("'@@NODE@@'", "2026-01-01").replace("'@@POD@@'", "1").replace("'@@LABEL@@'", "true")
    code, stdout, stderr = simulate(tmp_path, data=text.encode())
    assert code == 0, stderr
    result = json.loads(stdout)
    assert result["rounds"][0]["bound"] == [{"gpuGroups": [], "node": "2026-01-01", "pod": "ns/1"}]


def test_a_name_that_is_a_list_is_refused(tmp_path: Path) -> None:
    objects = base()
    objects[2]["metadata"]["name"] = ["p", "q"]
    assert "Pod ns/<unnamed>: metadata.name: must be a string, got a list" in refused(tmp_path, objects)


# -- numbers ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["1e309", ".inf", ".nan", "-.inf"])
def test_non_finite_queue_numbers(tmp_path: Path, raw: str) -> None:
    objects = base()
    objects[1]["spec"]["resources"]["gpu"]["quota"] = "@@X@@"
    text = write(objects, tmp_path, "x.yaml").read_text().replace("'@@X@@'", raw)
    err = refused(tmp_path, data=text.encode())
    assert "Queue q: spec.resources.gpu.quota: must be" in err


@pytest.mark.parametrize("raw", ["1e309", "'1e309'", ".inf", ".nan", "100Ei"])
def test_non_finite_or_huge_quantities(tmp_path: Path, raw: str) -> None:
    objects = base()
    objects[2]["spec"]["containers"][0]["resources"]["requests"]["memory"] = "@@X@@"
    text = write(objects, tmp_path, "x.yaml").read_text().replace("'@@X@@'", raw)
    err = refused(tmp_path, data=text.encode())
    assert "Pod ns/p: spec.containers[0].resources.requests.memory: is not a quantity" in err


def test_absurd_gpu_capacity_is_refused_naming_node_and_field(tmp_path: Path) -> None:
    objects = [node("big", gpus=10**8), queue("q"), pod("p", queue="q", gpus=1)]
    err = refused(tmp_path, objects)
    assert (
        "Node big: status.allocatable.nvidia.com/gpu: '100000000' GPUs on one node is more than kai accepts (4096)"
        in err
    )
    code, _, stderr = simulate(tmp_path, [node("big", gpus=4096), queue("q"), pod("p", queue="q", gpus=1)])
    assert code == 0, stderr


def test_fraction_over_absurdly_many_devices(tmp_path: Path) -> None:
    objects = [node("n", gpus=8), queue("q")]
    objects.append(
        pod("p", queue="q", node="n", annotations={"gpu-fraction": "0.5", "gpu-fraction-num-devices": "1000000000"})
    )
    assert "Pod ns/p: metadata.annotations[gpu-fraction-num-devices]: '1000000000' devices" in refused(
        tmp_path, objects
    )


def test_out_of_range_integers(tmp_path: Path) -> None:
    objects = base()
    objects[1]["spec"]["priority"] = 2**70
    assert "Queue q: spec.priority: must fit in 32 bits" in refused(tmp_path, objects)


# -- structure: queue chains, sub-group chains, an empty cluster ---------------------------------------------------


def test_queue_chain_of_1000_levels_is_refused_with_a_message(tmp_path: Path) -> None:
    chain = [queue("q0")] + [queue(f"q{i}", f"q{i - 1}") for i in range(1, 1000)]
    err = refused(tmp_path, [node("n"), *chain, pod("p", queue="q999", gpus=1)])
    assert "Queue q101: spec.parentQueue: is 101 levels below a top-level queue; kai accepts at most 100" in err


def test_queue_chain_of_100_levels_schedules(tmp_path: Path) -> None:
    chain = [queue("q0")] + [queue(f"q{i}", f"q{i - 1}") for i in range(1, 101)]
    code, stdout, stderr = simulate(tmp_path, [node("n"), *chain, pod("p", queue="q100", gpus=1)])
    assert code == 0, stderr
    assert json.loads(stdout)["rounds"][0]["bound"] == [{"gpuGroups": [], "node": "n", "pod": "ns/p"}]


def test_subgroup_chain_deeper_than_allowed(tmp_path: Path) -> None:
    subgroups = [{"name": f"s{i}", "minMember": 1, **({"parent": f"s{i - 1}"} if i else {})} for i in range(40)]
    err = refused(tmp_path, [node("n"), queue("q"), podgroup("g", "q", subgroups=subgroups)])
    assert "PodGroup ns/g: spec.subGroups: nest 40 levels deep; at most 32 are allowed" in err


def test_pending_pod_and_no_node_at_all(tmp_path: Path) -> None:
    code, stdout, stderr = simulate(tmp_path, [queue("q"), pod("p", queue="q", gpus=1)])
    assert code == 0, stderr
    result = json.loads(stdout)
    assert result["rounds"][0]["bound"] == [] and result["pods"]["ns/p"]["status"] == "Pending"


# -- the scheduler configuration file: read with the same limits ----------------------------------------------


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"actions: \"allocate\xff\"\n", "config.yaml: byte 18 (line 1, column 19): is not valid UTF-8"),
        (b"tiers: " + b"[" * 50_000 + b"]" * 50_000, "config.yaml: line 1, column"),
        (b"actions: allocate\n---\nactions: reclaim\n", "config.yaml: document 2: is one document too many"),
    ],
)
def test_config_file_reading(tmp_path: Path, data: bytes, expected: str) -> None:
    write(base(), tmp_path, "snap.yaml")
    (tmp_path / "config.yaml").write_bytes(data)
    done = run_cli(["simulate", "-f", str(tmp_path / "snap.yaml"), "--config", str(tmp_path / "config.yaml")])
    assert done.returncode == 1 and "Traceback" not in done.stderr and "internal error" not in done.stderr
    assert expected in done.stderr
