"""The local Spark session of the tests listens on loopback only, as everything rill starts."""

from __future__ import annotations

import ipaddress

import psutil


def test_the_spark_driver_listens_on_loopback_only(spark) -> None:
    assert spark.conf.get("spark.driver.host") == "127.0.0.1"
    assert spark.range(10).count() == 10  # the driver's services are up
    jvms = [child for child in psutil.Process().children(recursive=True)
            if child.name() == "java"]
    assert jvms, "no Spark JVM found"
    listening = [connection.laddr.ip for jvm in jvms
                 for connection in jvm.net_connections(kind="inet")
                 if connection.status == psutil.CONN_LISTEN]
    assert listening, "the Spark driver listens on nothing"
    assert all(is_loopback(ip) for ip in listening), listening


def is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    return (getattr(address, "ipv4_mapped", None) or address).is_loopback  # ::ffff:127.0.0.1
