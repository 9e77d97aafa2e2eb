"""The scheduler and binder behind a proxy that answers 409/429/500 to writes and 410 or a cut stream to
watches, while the test deletes BindRequests under them: everything ends bound, once, and consistent."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from kai.cluster.kube import BIND_REQUESTS, EVENTS, QUEUES, Kube
from kai.devcluster.live import LiveCluster
from tests.live.fault_proxy import FaultProxy
from tests.live.scheduler_helpers import (
    bound,
    cleanup,
    create,
    fresh_nodes,
    pod,
    podgroup,
    queue,
    scheduler,
    unique_scheduler_name,
    wait,
)

GANGS, SIZE = 15, 4


def test_the_scheduler_recovers_from_api_errors_and_loses_nothing(
    live_cluster: LiveCluster, namespace: str, tmp_path: Path
) -> None:
    admin = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    cp = live_cluster.control_plane
    assert cp.pki is not None
    proxy = FaultProxy(cp.server, cp.pki.ca_cert, cp.pki.admin_cert, cp.pki.admin_key).start()
    kube = Kube.from_kubeconfig(str(proxy.kubeconfig(tmp_path / "proxy.kubeconfig")))
    name = unique_scheduler_name()
    q = f"q-{name}"
    create(admin, queue(q))
    nodes = fresh_nodes(live_cluster, 8, gpus=8)
    try:
        with scheduler(
            kube,
            name,
            leader_elect=True,
            lease_namespace=namespace,
            lease_duration=6.0,
            renew_deadline=4.0,
            retry_period=0.5,
        ) as process:
            for i in range(GANGS):
                create(admin, podgroup(f"g{i}", namespace, q, min_member=SIZE))
                for j in range(SIZE):
                    create(admin, pod(f"g{i}-{j}", namespace, name, group=f"g{i}", gpus=1))
                if i == GANGS // 2:
                    wait("some pods bound", lambda: len(bound(admin, namespace)) >= 8, timeout=60)
                    # Pull BindRequests out from under the scheduler and the binder.
                    for br in admin.get(BIND_REQUESTS.path(namespace))["items"]:
                        admin.delete(BIND_REQUESTS.path(namespace, br["metadata"]["name"]))
            try:
                placed = wait(
                    "every pod bound despite the faults",
                    lambda: len(bound(admin, namespace)) == GANGS * SIZE and bound(admin, namespace),
                    timeout=120,
                    interval=0.5,
                )
            except AssertionError as err:  # say what is stuck
                now_bound = bound(admin, namespace)
                brs = {
                    b["spec"]["podName"]: (b["spec"]["selectedNode"], (b.get("status") or {}).get("phase"))
                    for b in admin.get(BIND_REQUESTS.path(namespace))["items"]
                }
                stuck = sorted(set(f"g{i}-{j}" for i in range(GANGS) for j in range(SIZE)) - set(now_bound))
                raise AssertionError(f"{err}; unbound: {[(p, brs.get(p)) for p in stuck]}") from None
            assert sum(proxy.injected.values()) >= 10, proxy.injected
            assert {"409", "429", "500"} <= set(proxy.injected), proxy.injected
            reflectors = process.cache.reflectors.values()
            assert sum(r.gone for r in reflectors) >= 1 and sum(r.lists for r in reflectors) > len(reflectors)
            # Faults off: the status catches up.
            proxy.enabled = False
            wait(
                "the queue status to show every GPU",
                lambda: (
                    ((admin.get(QUEUES.path(name=q)).get("status") or {}).get("allocated") or {}).get("nvidia.com/gpu")
                    == str(GANGS * SIZE)
                ),
                timeout=30,
            )
            time.sleep(0.5)
            assert bound(admin, namespace) == placed
        per_node = Counter(placed.values())
        assert set(per_node) <= set(nodes) and max(per_node.values()) <= 8
        for br in admin.get(BIND_REQUESTS.path(namespace))["items"]:
            pname = br["spec"]["podName"]
            if (br.get("status") or {}).get("phase") == "Succeeded":
                assert br["spec"]["selectedNode"] == placed[pname], pname
        refused = [
            e
            for e in admin.get(EVENTS.path(namespace))["items"]
            if e["reason"] == "BindingError" and "already bound" in e["message"]
        ]
        # A pod whose BindRequest was deleted mid-bind may be placed again; the API server refuses the
        # second binding and the binder reports it. What matters: the pod stays where it was bound once.
        for event in refused:
            assert event["involvedObject"]["name"] in placed
        print(f"injected {dict(proxy.injected)}; forwarded {proxy.forwarded}")
    finally:
        proxy.stop()
        cleanup(admin, namespace, [q])
