"""The power-cut harness: a ``powercut_fs`` mount that a test can cut the power of.

``PowerCutMount(root)`` keeps the durable state in ``root/backing`` and mounts it at
``root/mnt``. ``power_cycle()`` is a power loss and a reboot: unsynced data is dropped, the file
system unmounted and mounted again (so no kernel page cache survives either). Whoever uses the
mount must be stopped (kill -9 is the point) before a cut. The file system process is this
harness's own and is stopped by pid; the mount is always undone at ``stop()``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

FS_SCRIPT = Path(__file__).with_name("powercut_fs.py")
MOUNT_TIMEOUT = 15.0


class PowerCutMount:
    def __init__(self, root: Path) -> None:
        self.backing = root / "backing"
        self.mountpoint = root / "mnt"
        self.log = root / "powercut_fs.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)

    def mount(self) -> PowerCutMount:
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, str(FS_SCRIPT), str(self.backing), str(self.mountpoint)],
                stdout=log, stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + MOUNT_TIMEOUT
        while not os.path.ismount(self.mountpoint):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"powercut_fs did not mount:\n{self.log.read_text()}")
            time.sleep(0.02)
        return self

    def cut(self) -> None:
        """Drop every byte not synced (the mount stays until ``unmount``)."""
        try:
            open(self.mountpoint / ".powercut", "w").close()
        except OSError:
            pass  # EIO: the file system's way of saying "done"
        else:
            raise RuntimeError("powercut_fs did not take the cut")

    def unmount(self) -> None:
        if os.path.ismount(self.mountpoint):
            done = subprocess.run(["fusermount3", "-u", str(self.mountpoint)], capture_output=True)
            if done.returncode != 0:  # still busy: detach it lazily
                subprocess.run(["fusermount3", "-uz", str(self.mountpoint)], capture_output=True)
        if self.process is not None:
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
            self.process = None

    def power_cycle(self) -> None:
        self.cut()
        self.unmount()
        self.mount()

    def stop(self) -> None:
        self.unmount()
