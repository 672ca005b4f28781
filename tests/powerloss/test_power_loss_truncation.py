"""Power loss during and after a truncation (``PartitionLog.truncate_to``): a process cuts a log
on the power-cut file system (``powercut_fs``: unsynced bytes are dropped at a cut) and dies,
either after the cut returned or before one of its file steps; then the power goes. The log
opened afterwards holds the cut whole (what was cut to, synced before the cut returned) or, when
the process died before the truncation marker was written, the log as it was."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from .powercut import PowerCutMount

STORAGE_TESTS = Path(__file__).parent.parent / "server" / "storage"
sys.path.insert(0, str(STORAGE_TESTS))

from storage_helpers import snapshot  # noqa: E402
from test_replica import BATCHES, filled, offsets_read, open_at  # noqa: E402

_CUTTING = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[4])
    from rill.server.storage import truncation
    from test_replica import open_at

    stop_at, calls = int(sys.argv[3]), 0

    def stopping(step):
        def run(*args, **kwargs):
            global calls
            calls += 1
            if calls == stop_at:
                os._exit(17)
            return step(*args, **kwargs)
        return run

    for name in ("write_atomically", "_delete_segment", "_cut_file", "trim_leader_epochs",
                 "clamp_high_watermark"):
        setattr(truncation, name, stopping(getattr(truncation, name)))
    log = open_at(Path(sys.argv[1]), sys.argv[2])
    log.truncate_to(int(sys.argv[5]))
    os._exit(0)  # no close: what the cut did not sync is lost at the power cut
""")


@pytest.fixture
def mount(tmp_path):
    fs = PowerCutMount(tmp_path).mount()
    yield fs
    fs.stop()


@pytest.mark.parametrize("record_format", ["iggy-v1", "kafka-v2"])
def test_a_power_cut_after_or_during_a_truncation_leaves_it_whole_or_undone(
        mount: PowerCutMount, tmp_path: Path, record_format: str) -> None:
    probe = filled(tmp_path / "probe", record_format)
    cut = probe.segments[1].start_offset + 3
    probe.close()
    untouched = snapshot(tmp_path / "probe")
    reference = filled(tmp_path / "reference", record_format, cut // 3)
    reference.close()
    truncated = snapshot(tmp_path / "reference")
    environment = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    stop_at, outcomes = 1, []
    while True:
        directory = mount.mountpoint / f"stop-{stop_at}"
        filled(directory, record_format).close()  # closed: synced
        done = subprocess.run(
            [sys.executable, "-c", _CUTTING, str(directory), record_format, str(stop_at),
             str(STORAGE_TESTS), str(cut)],
            env=environment, capture_output=True, text=True, timeout=120)
        assert done.returncode in (0, 17), done.stderr
        mount.power_cycle()
        log = open_at(directory, record_format, clean_shutdown=False)
        outcomes.append(log.next_offset)
        assert offsets_read(log) == list(range(log.next_offset)), stop_at
        log.close()
        assert snapshot(directory) == (truncated if log.next_offset == cut else untouched), \
            stop_at
        if done.returncode == 0:
            break
        stop_at += 1
    assert outcomes[0] == 3 * BATCHES and set(outcomes[1:]) == {cut} and len(outcomes) >= 5
