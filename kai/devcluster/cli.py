"""`kai dev-cluster`: a throw-away real control plane for a person trying kai (filled by the control-plane work)."""

import typer

app = typer.Typer(help="A throw-away control plane (etcd, kube-apiserver, KWOK GPU nodes).", no_args_is_help=True)
