"""Which usage source the live scheduler gets for its usageDBConfig, and a usage DB that does not answer."""

from __future__ import annotations

import socket

from kai.cluster.usagedb import PrometheusUsage, connection_string, usage_source
from kai.framework.config import UsageDBConfig, UsageParams
from kai.model import GPU
from kai.usage import UsageTracker


def test_the_connection_string_comes_first_then_the_environment_variable() -> None:
    env = {"PROM": "http://from-env:9090"}
    assert connection_string(UsageDBConfig(connection_string="http://direct:9090"), env) == "http://direct:9090"
    assert connection_string(UsageDBConfig(connection_string_env_var="PROM"), env) == "http://from-env:9090"
    assert connection_string(UsageDBConfig(connection_string_env_var="UNSET"), env) == ""
    assert connection_string(UsageDBConfig(), env) == ""


def test_prometheus_with_an_address_is_asked_otherwise_the_scheduler_keeps_its_own_record() -> None:
    assert usage_source(None) is None
    prometheus = usage_source(UsageDBConfig(connection_string="http://127.0.0.1:9090"))
    assert isinstance(prometheus, PrometheusUsage)
    assert prometheus.url == "http://127.0.0.1:9090"
    assert isinstance(usage_source(UsageDBConfig()), UsageTracker)
    assert isinstance(usage_source(UsageDBConfig(client_type="fake", connection_string="http://x:1")), UsageTracker)


def closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_usage_db_that_does_not_answer_keeps_the_last_usage() -> None:
    config = UsageDBConfig(connection_string=f"http://127.0.0.1:{closed_port()}", params=UsageParams(wait_timeout=0.0))
    source = PrometheusUsage(config.connection_string, config)
    assert source.fetch_and_store() is False
    assert "127.0.0.1" in source.last_error
    source._usage = {"a": {GPU: 0.5}}  # what an earlier fetch had found
    assert source.fetch_and_store() is False
    assert source.queue_usage(0.0) == {"a": {GPU: 0.5}}
    source.close()
