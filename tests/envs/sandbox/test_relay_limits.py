"""The host side of a sandbox's relay costs a bounded number of threads and fds: a sandbox that opens 2,000
connections to its Unix socket and holds them gets at most ``MAX_CONNECTIONS`` relayed (the rest are closed at
once), another sandbox's relay keeps serving, and closing the relay ends every thread it started. Against a
loopback echo server standing in for the gateway; counts read from ``/proc/self/fd`` and ``threading``."""
import os
import socket
import threading
import time

import pytest

from trajkit.envs.sandbox import relay

ATTEMPTS = 2000
CAP = relay.MAX_CONNECTIONS


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def echo():
    """A TCP echo server on loopback (one thread per connection, closed with the fixture)."""
    srv = socket.create_server(("127.0.0.1", 0))
    conns = []

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            conns.append(c)
            threading.Thread(target=lambda c=c: [c.sendall(d) for d in iter(lambda: c.recv(4096), b"")],
                             daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    yield srv.getsockname()[1]
    srv.close()
    for c in conns:
        c.close()


def _roundtrip(path: str) -> bytes:
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(path)
        s.sendall(b"ping")
        return s.recv(16)


def _settle(check, timeout: float = 5.0) -> None:
    end = time.monotonic() + timeout
    while not check() and time.monotonic() < end:
        time.sleep(0.05)


def test_a_sandbox_holding_2000_connections_costs_the_host_at_most_the_cap(echo, tmp_path):
    threads0, fds0 = threading.active_count(), _fds()
    hog = relay.unix_to_tcp(str(tmp_path / "a.sock"), echo)
    other = relay.unix_to_tcp(str(tmp_path / "b.sock"), echo)
    held = []
    try:
        for _ in range(ATTEMPTS):
            s = socket.socket(socket.AF_UNIX)
            s.settimeout(5)
            try:
                s.connect(str(tmp_path / "a.sock"))
            except OSError:
                s.close()
                continue
            held.append(s)
        time.sleep(0.5)
        host_fds = _fds() - fds0 - len(held)  # the test's own client ends are not the relay's
        host_threads = threading.active_count() - threads0
        # each relayed connection: a client and an upstream fd (and the echo's end), two relay threads
        # (and the echo's one); plus the two listeners and their accept threads
        assert host_threads <= 3 * CAP + 2 + 8, host_threads
        assert host_fds <= 3 * CAP + 2 + 8, host_fds
        assert _roundtrip(str(tmp_path / "b.sock")) == b"ping"  # the other sandbox is still served
    finally:
        for s in held:
            s.close()
        hog.close()
        other.close()
    _settle(lambda: threading.active_count() <= threads0 + 2 * CAP)  # the echo's threads end with its peers


def test_closing_the_relay_ends_its_threads_while_connections_are_held(echo, tmp_path):
    threads0 = threading.active_count()
    r = relay.unix_to_tcp(str(tmp_path / "a.sock"), echo, max_connections=4)
    held = [socket.socket(socket.AF_UNIX) for _ in range(6)]
    for s in held:
        s.connect(str(tmp_path / "a.sock"))
    _settle(lambda: r.active == 4)
    assert r.active == 4
    _settle(lambda: r.refused == 2)
    assert r.refused == 2
    r.close()
    _settle(lambda: r.active == 0)
    assert r.active == 0
    relay_threads = [t for t in threading.enumerate() if getattr(t, "_target", None) is not None
                     and getattr(t._target, "__self__", None) is r]
    assert relay_threads == []
    for s in held:
        s.close()
    _settle(lambda: threading.active_count() <= threads0)
