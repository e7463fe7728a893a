"""A task's network: ``slirp4netns`` in the sandbox command's own network namespace (Harbor's private network
with outbound access): ``tap0`` at 10.0.2.100, DNS at 10.0.2.3, no way to the host's loopback
(``--disable-host-loopback``); it runs with ``--enable-sandbox --enable-seccomp`` and ends with the command.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

from trajkit.envs.sandbox.base import SandboxError

NET_TOOL = "slirp4netns"  # only for tasks with the network (Debian: slirp4netns)
SLIRP_DNS = "10.0.2.3"


def network_available() -> str | None:
    """None when a task with the network can run here, else why not."""
    return None if shutil.which(NET_TOOL) else f"a task with the network needs {NET_TOOL} (apt-get install slirp4netns)"


class Network:
    """A running ``slirp4netns`` for one command's namespace; ``close`` ends it."""

    def __init__(self, proc: subprocess.Popen, exit_w: int):
        self.proc, self.exit_w = proc, exit_w

    def close(self) -> None:
        os.close(self.exit_w)  # slirp4netns exits when its --exit-fd closes
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def attach_network(outer: subprocess.Popen, ready: Path, timeout_s: float = 10.0) -> Network:
    """Start ``slirp4netns`` on the network namespace of ``outer``'s child (the namespace's pid 1), wait until
    ``tap0`` is configured, then create ``ready``, which the namespace waits for before its command runs."""
    children = Path(f"/proc/{outer.pid}/task/{outer.pid}/children")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            pid = children.read_text().split()
        except OSError:
            pid = []
        if pid or outer.poll() is not None or time.monotonic() > deadline:
            break
        time.sleep(0.001)
    if not pid:
        raise SandboxError("the sandbox's namespace did not start, so its network could not be attached")
    ready_r, ready_w = os.pipe()
    exit_r, exit_w = os.pipe()
    proc = subprocess.Popen([NET_TOOL, "--configure", "--mtu=65520", "--disable-host-loopback", "--enable-sandbox",
                             "--enable-seccomp", f"--ready-fd={ready_w}", f"--exit-fd={exit_r}", pid[0], "tap0"],
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            pass_fds=(ready_w, exit_r))
    os.close(ready_w)
    os.close(exit_r)
    ok = os.read(ready_r, 1) == b"1"
    os.close(ready_r)
    if not ok:
        os.close(exit_w)
        proc.wait()
        raise SandboxError(f"{NET_TOOL} could not configure the sandbox's network: {proc.stderr.read().decode()[-300:]}")
    ready.touch()
    return Network(proc, exit_w)


