"""Nothing silent, against the real API server: a pod with a Dynamic Resource Allocation claim is
left Pending with a why-pending condition naming the claim, gets an `UnsupportedFeature` event, and
is counted once in `kai_unsupported_feature_uses_total`, while its neighbour is bound."""

from __future__ import annotations

import time

from kai.cluster.kube import EVENTS, Kube
from kai.devcluster.live import LiveCluster
from tests.live.scheduler_helpers import (
    bound,
    cleanup,
    condition,
    create,
    fresh_nodes,
    pod,
    pods,
    queue,
    scheduler,
    unique_scheduler_name,
    wait,
)


def test_a_pod_with_a_resource_claim_stays_pending_and_is_reported(live_cluster: LiveCluster, namespace: str) -> None:
    kube = Kube.from_kubeconfig(str(live_cluster.kubeconfig))
    name = unique_scheduler_name()
    q = f"q-{name}"
    create(kube, queue(q))
    fresh_nodes(live_cluster, 1, gpus=8)
    claiming = pod("dra", namespace, name, queue_name=q)
    claiming["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "gpu-claim"}]
    claiming["spec"]["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
    create(kube, claiming)
    create(kube, pod("plain", namespace, name, queue_name=q, gpus=1))
    try:
        with scheduler(kube, name) as process:
            wait("the plain pod to be bound", lambda: "plain" in bound(kube, namespace))
            pending = wait(
                "the why-pending condition",
                lambda: condition(p := pods(kube, namespace)["dra"], "PodScheduled") and p,
            )
            message = condition(pending, "PodScheduled")["message"]  # type: ignore[index]
            assert "gpu (ResourceClaim gpu-claim)" in message and "Dynamic Resource Allocation" in message
            cycles = process.scheduler.cycles if process.scheduler else 0
            wait("a few more cycles", lambda: process.scheduler is not None and process.scheduler.cycles >= cycles + 3)
            assert "dra" not in bound(kube, namespace)
            text = process.metrics.render().decode()
            assert 'kai_unsupported_feature_uses_total{feature="DynamicResourceAllocation"} 1.0' in text
        time.sleep(0.5)  # let the event writers finish
        events = [
            e
            for e in kube.get(EVENTS.path(namespace))["items"]
            if e["reason"] == "UnsupportedFeature" and e["involvedObject"]["name"] == "dra"
        ]
        assert len(events) == 1 and "spec.resourceClaims" in events[0]["message"]
    finally:
        cleanup(kube, namespace, [q])
