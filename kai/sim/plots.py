"""The report's plots, drawn with matplotlib's Agg backend (no display needed) and returned as PNG
bytes: GPU allocation over time, each queue's allocation against its fair share, queue usage (time-
based fair share), queue wait times, fragmentation, and Jain's fairness index over time.
"""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

from kai.sim.metrics import jain, queue_fairness_samples
from kai.sim.trace import TraceResult

MAX_QUEUE_PANELS = 8
COLORS = plt.rcParams["axes.prop_cycle"].by_key()["color"]


def _time_axis(result: TraceResult) -> tuple[float, str]:
    """Divide seconds by this to get the unit named."""
    span = result.end - result.start
    if span > 3 * 86400:
        return 86400.0, "days"
    if span > 3 * 3600:
        return 3600.0, "hours"
    return 60.0, "minutes"


def _png(fig: Figure) -> bytes:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100, metadata={"Software": None})
    plt.close(fig)
    return buffer.getvalue()


def _steps(times: list[float], values: list[float], result: TraceResult, scale: float) -> tuple[np.ndarray, np.ndarray]:
    t = (np.array([*times, result.end], dtype=float) - result.start) / scale
    v = np.array([*values, values[-1] if values else 0.0], dtype=float)
    return t, v


def allocation_plot(result: TraceResult, title: str = "") -> bytes:
    scale, unit = _time_axis(result)
    fig, ax = plt.subplots(figsize=(10, 3.8))
    t, v = _steps(result.alloc_times, result.alloc_total, result, scale)
    ax.step(t, v, where="post", label="allocated GPUs", color=COLORS[0])
    ax.axhline(result.capacity.get("gpu", 0.0), color="grey", linestyle="--", label="cluster GPUs")
    handles = ax.get_legend_handles_labels()
    if result.cycles:
        ct = (np.array([c.time for c in result.cycles]) - result.start) / scale
        demand = np.array([c.pending_gpus for c in result.cycles])
        waiting = ax.twinx()
        waiting.step(ct, demand, where="post", label="GPUs waiting (right axis)", color=COLORS[1], alpha=0.6)
        waiting.set_ylabel("GPUs asked for by pending pods", color=COLORS[1])
        waiting.set_ylim(bottom=0)
        more = waiting.get_legend_handles_labels()
        handles = (handles[0] + more[0], handles[1] + more[1])
    ax.set_ylim(0, max(result.capacity.get("gpu", 0.0), 1.0) * 1.08)
    ax.set_xlabel(f"virtual time ({unit})")
    ax.set_ylabel("GPUs")
    ax.set_title(title or "GPU allocation over time")
    ax.legend(*handles, loc="lower right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def _top_leaves(result: TraceResult) -> list[str]:
    leaves = result.leaf_queues
    if len(leaves) <= MAX_QUEUE_PANELS:
        return leaves
    totals = {q: float(np.sum(result.alloc_by_queue.get(q, [0.0]))) for q in leaves}
    return sorted(sorted(leaves, key=lambda q: -totals[q])[:MAX_QUEUE_PANELS])


def queues_plot(result: TraceResult, title: str = "") -> bytes:
    """One panel per leaf queue: allocated GPUs against fair share (as each cycle computed it)."""
    scale, unit = _time_axis(result)
    leaves = _top_leaves(result) or ["(none)"]
    fig, axes = plt.subplots(len(leaves), 1, figsize=(10, 1.9 * len(leaves) + 0.8), sharex=True, squeeze=False)
    ct = (np.array([c.time for c in result.cycles], dtype=float) - result.start) / scale
    for ax, queue in zip(axes[:, 0], leaves, strict=True):
        if queue in result.alloc_by_queue:
            t, v = _steps(result.alloc_times, result.alloc_by_queue[queue], result, scale)
            ax.step(t, v, where="post", label="allocated", color=COLORS[0])
        if result.cycles:
            fair = np.array([c.fair_share.get(queue, 0.0) for c in result.cycles])
            ax.step(ct, fair, where="post", label="fair share", color=COLORS[3], linestyle="--")
        ax.set_ylabel(f"{queue}\nGPUs", fontsize=8)
        ax.grid(alpha=0.3)
    axes[0, 0].legend(loc="upper right", fontsize=8)
    axes[0, 0].set_title(title or "Allocation against fair share, per queue")
    axes[-1, 0].set_xlabel(f"virtual time ({unit})")
    fig.tight_layout()
    return _png(fig)


def usage_plot(result: TraceResult, title: str = "") -> bytes:
    """The usage each cycle's fair share was computed with (time-based fair share)."""
    scale, unit = _time_axis(result)
    fig, ax = plt.subplots(figsize=(10, 3.5))
    ct = (np.array([c.time for c in result.cycles], dtype=float) - result.start) / scale
    for i, queue in enumerate(_top_leaves(result)):
        values = np.array([c.usage.get(queue, 0.0) for c in result.cycles])
        ax.step(ct, values, where="post", label=queue, color=COLORS[i % len(COLORS)])
    ax.set_xlabel(f"virtual time ({unit})")
    ax.set_ylabel("usage (share of cluster GPUs)")
    ax.set_title(title or "Queue usage over the window (time-based fair share)")
    if result.leaf_queues:
        ax.legend(loc="upper right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def wait_plot(result: TraceResult, title: str = "") -> bytes:
    """Cumulative distribution of queue wait (submit to first start), per leaf queue and overall."""
    fig, ax = plt.subplots(figsize=(10, 3.5))
    groups: list[tuple[str, list[float]]] = [
        ("all jobs", [j.first_start - j.submit for j in result.jobs if j.first_start is not None])
    ]
    for queue in _top_leaves(result):
        groups.append(
            (queue, [j.first_start - j.submit for j in result.jobs if j.queue == queue and j.first_start is not None])
        )
    for i, (label, waits) in enumerate(groups):
        if not waits:
            continue
        values = np.sort(np.maximum(np.array(waits, dtype=float), 1.0))
        share = np.arange(1, values.size + 1) / values.size
        style = {"color": "black", "linewidth": 2} if i == 0 else {"color": COLORS[(i - 1) % len(COLORS)]}
        ax.step(values, share, where="post", label=label, **style)
    ax.set_xscale("log")
    ax.set_xlabel("queue wait (seconds, log scale; waits under 1 s shown at 1 s)")
    ax.set_ylabel("share of started jobs")
    ax.set_ylim(0, 1.02)
    ax.set_title(title or "Queue wait")
    ax.legend(loc="lower right", fontsize=8)
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    return _png(fig)


def fragmentation_plot(result: TraceResult, title: str = "") -> bytes:
    scale, unit = _time_axis(result)
    fig, ax = plt.subplots(figsize=(10, 3.2))
    ct = (np.array([c.time for c in result.cycles], dtype=float) - result.start) / scale
    ax.step(ct, [c.free_gpus for c in result.cycles], where="post", label="free GPUs", color=COLORS[2])
    ax.step(
        ct,
        [c.fragmented_gpus for c in result.cycles],
        where="post",
        label="free GPUs no waiting pod fits (fragmented)",
        color=COLORS[3],
    )
    ax.set_xlabel(f"virtual time ({unit})")
    ax.set_ylabel("GPUs")
    ax.set_title(title or "Free and fragmented GPUs (after each cycle)")
    ax.legend(loc="upper right", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def fairness_plot(result: TraceResult, title: str = "") -> bytes:
    scale, unit = _time_axis(result)
    fig, ax = plt.subplots(figsize=(10, 3.0))
    leaves = result.leaf_queues
    points = [(c.time, jain(queue_fairness_samples(c, leaves))) for c in result.cycles]
    kept = [(t, v) for t, v in points if v is not None]
    if kept:
        ax.step([(t - result.start) / scale for t, _ in kept], [v for _, v in kept], where="post", color=COLORS[4])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel(f"virtual time ({unit})")
    ax.set_ylabel("Jain's index")
    ax.set_title(title or "Jain's fairness index of allocation / fair share over queues with a fair share")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def all_plots(result: TraceResult) -> dict[str, bytes]:
    """Every plot of one run, by file stem, in the order the report shows them."""
    plots = {
        "allocation": allocation_plot(result),
        "queues": queues_plot(result),
    }
    if result.time_based:
        plots["usage"] = usage_plot(result)
    plots["wait"] = wait_plot(result)
    plots["fragmentation"] = fragmentation_plot(result)
    plots["fairness"] = fairness_plot(result)
    return plots
