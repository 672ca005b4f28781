"""``rill config show``: the configuration ``rill serve`` would run with, each key's source,
secrets masked (no server needed)."""

from __future__ import annotations

import json
import os
import subprocess

from .helpers import RILL


def _rill(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {key: value for key, value in os.environ.items() if not key.startswith("RILL_")}
    return subprocess.run([RILL, *args], capture_output=True, text=True, timeout=60,
                          env={**environ, **env, "COLUMNS": "200"})


def test_config_show_names_the_source_of_every_value_and_masks_secrets(tmp_path):
    config = tmp_path / "server.toml"
    config.write_text('[system]\nfsync_interval = "250 ms"\n\n[http]\nenabled = false\n')
    shown = _rill("--json", "config", "show", "--config", str(config), "--data-dir", str(tmp_path / "d"),
                  RILL_SYSTEM_FSYNC="always", RILL_ROOT_PASSWORD="hunter2-secret")
    assert shown.returncode == 0, shown.stderr
    assert "hunter2-secret" not in shown.stdout
    rows = {row["key"]: (row["value"], row["source"]) for row in json.loads(shown.stdout)}
    assert rows["system.fsync_interval"] == ("0.25 s", f"file {config}")
    assert rows["http.enabled"] == ("false", f"file {config}")
    assert rows["system.fsync"] == ("always", "environment RILL_SYSTEM_FSYNC")
    assert rows["root.password"] == ("********", "environment RILL_ROOT_PASSWORD")
    assert rows["system.path"] == (str(tmp_path / "d"), "flag --data-dir")
    assert rows["tcp.address"] == ("127.0.0.1:8090", "default")

    table = _rill("config", "show", RILL_ROOT_PASSWORD="hunter2-secret")
    assert table.returncode == 0 and "hunter2-secret" not in table.stdout
    assert any(line.split("│")[1:4] and "root.password" in line and "********" in line
               and "environment RILL_ROOT_PASSWORD" in line for line in table.stdout.splitlines())


def test_config_show_refuses_a_bad_value_in_one_line(tmp_path):
    bad = _rill("config", "show", RILL_SYSTEM_FSYNC="sometimes")
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == [
        "rill: system.fsync: 'sometimes' is not one of never, interval, always"]


def test_the_kafka_address_flag_sets_and_enables_the_kafka_listener():
    shown = _rill("--json", "config", "show", "--kafka-address", "127.0.0.1:19092")
    assert shown.returncode == 0, shown.stderr
    rows = {row["key"]: (row["value"], row["source"]) for row in json.loads(shown.stdout)}
    assert rows["kafka.address"] == ("127.0.0.1:19092", "flag --kafka-address")
    assert rows["kafka.enabled"] == ("true", "flag --kafka-address")
    default = {row["key"]: row["value"] for row in json.loads(_rill("--json", "config", "show").stdout)}
    assert (default["kafka.enabled"], default["kafka.address"]) == ("false", "127.0.0.1:9092")
    bad = _rill("config", "show", "--kafka-address", "9092")
    assert bad.returncode == 2 and "--kafka-address" in bad.stderr
