"""`kai podgrouper`: run the podgrouper controller against a cluster until SIGTERM or Ctrl-C.

    kai podgrouper                                   # in a cluster (service account)
    kai podgrouper --kubeconfig kc --namespace-selector team=ml

Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import logging
import signal
from pathlib import Path
from typing import Annotated

import typer

from kai.api import keys

from .chain import GroupingOptions
from .controller import ControllerConfig, PodGrouperController


def podgrouper(
    kubeconfig: Annotated[Path | None, typer.Option(help="Kubeconfig (default: in-cluster, then ~/.kube/config).")] = (
        None
    ),
    scheduler_name: Annotated[str, typer.Option(help="Pods with this schedulerName are grouped.")] = (
        keys.SCHEDULER_NAME
    ),
    queue_label_key: Annotated[str, typer.Option(help="Label naming a workload's queue.")] = keys.QUEUE_LABEL,
    nodepool_label_key: Annotated[str, typer.Option(help="Node-pool label copied from pods.")] = keys.NODE_POOL_LABEL,
    default_queue: Annotated[str, typer.Option(help="Queue of workloads that name none.")] = keys.DEFAULT_QUEUE,
    namespace_selector: Annotated[str, typer.Option(help="Label selector: only pods in matching namespaces.")] = "",
    pod_selector: Annotated[str, typer.Option(help="Label selector: only matching pods.")] = "",
    gang_schedule_knative: Annotated[bool, typer.Option(help="One gang PodGroup per Knative revision.")] = True,
    search_legacy_pg: Annotated[bool, typer.Option(help="Keep using PodGroups named by older podgroupers.")] = True,
    default_priorities_configmap_name: Annotated[str, typer.Option(help="ConfigMap of per-kind defaults.")] = "",
    default_priorities_configmap_namespace: Annotated[str, typer.Option(help="Its namespace.")] = "kai-scheduler",
    workers: Annotated[int, typer.Option(min=1, help="Pods handled in parallel.")] = 4,
    leader_elect: Annotated[bool, typer.Option(help="Write only while holding the Lease (for replicas > 1).")] = (
        False
    ),
    lease_namespace: Annotated[str, typer.Option(help="Namespace of the Lease.")] = "kai-scheduler",
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="Debug logging.")] = False,
) -> None:
    """Group pods into PodGroups by their workload (top owner), as KAI's podgrouper does."""
    from kai.cluster.kube import Kube

    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = GroupingOptions(
        scheduler_name=scheduler_name, queue_label_key=queue_label_key, node_pool_label_key=nodepool_label_key,
        default_queue=default_queue, gang_schedule_knative=gang_schedule_knative,
        search_legacy_podgroups=search_legacy_pg,
    )
    config = ControllerConfig(
        options=options, namespace_selector=namespace_selector, pod_selector=pod_selector, workers=workers,
        default_priorities_configmap=default_priorities_configmap_name,
        default_priorities_namespace=default_priorities_configmap_namespace,
        leader_elect=leader_elect, lease_namespace=lease_namespace,
    )
    try:
        kube = Kube.connect(str(kubeconfig) if kubeconfig else None)
        kube.get("/version")
    except Exception as err:  # any failure (bad kubeconfig, refused connection, 401) is one line for the user
        typer.echo(f"error: cannot reach the API server: {err}", err=True)
        raise typer.Exit(1) from None
    controller = PodGrouperController(kube, config)
    signal.signal(signal.SIGTERM, lambda *_: controller.stop())
    logging.getLogger("kai.podgrouper").info("podgrouper watching pods with schedulerName=%s", scheduler_name)
    try:
        controller.run_forever()
    except KeyboardInterrupt:
        pass
    finally:
        controller.stop()
