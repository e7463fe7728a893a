"""A byte relay between a TCP port and a Unix socket (standard library only: it also runs inside a sandbox).

How a sandbox without a network reaches the gateway: on the host, :func:`unix_to_tcp` listens on a Unix socket
in a folder that the sandbox bind-mounts (``/run/trajkit``) and forwards each connection to the gateway's
loopback port; inside, ``python3 relay.py PORT SOCKET`` listens on ``127.0.0.1:PORT`` of the sandbox's own
loopback-only network and forwards each connection to that socket. No interface, route or port is opened: the
only way out is the one socket, which reaches only the gateway.

    python3 relay.py 8000 /run/trajkit/gateway.sock    # inside: 127.0.0.1:8000 -> the socket
"""
from __future__ import annotations

import os
import socket
import sys
import threading
import time


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)  # pass the end of one direction on; the other may still be talking
    except OSError:
        pass


def _bridge(client: socket.socket, connect) -> None:
    try:
        upstream = connect()
    except OSError:
        client.close()
        return
    _join(client, upstream)


def _join(client: socket.socket, upstream: socket.socket) -> None:
    up = threading.Thread(target=_pipe, args=(client, upstream), daemon=True)
    up.start()
    _pipe(upstream, client)
    up.join()
    client.close()
    upstream.close()


def serve(listener: socket.socket, connect) -> None:
    """Accept on ``listener`` until it is closed; each connection is piped both ways to ``connect()``."""
    while True:
        try:
            client, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=_bridge, args=(client, connect), daemon=True).start()


MAX_CONNECTIONS = 32  # a sandbox's concurrent connections to the host's listener


class Relay:
    """The host side of one sandbox's relay: a Unix listener whose connections are piped to ``connect()``.

    At most ``max_connections`` are open at once: a connection accepted beyond that is closed at once, so the
    threads (two per connection) and fds that one sandbox costs the host are bounded, whatever it opens.
    :meth:`close` closes the listener and every open connection, which ends all of its threads."""

    def __init__(self, listener: socket.socket, connect, max_connections: int = MAX_CONNECTIONS):
        self.listener, self._connect, self.max_connections = listener, connect, max_connections
        self._lock = threading.Lock()
        self._clients: set[socket.socket] = set()  # the sandbox's connections, counted against the cap
        self._open: set[socket.socket] = set()  # those and their upstream connections, shut down by close()
        self._closed = False
        self.refused = 0  # connections closed at once because the cap was reached
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def active(self) -> int:
        """The connections from the sandbox now open."""
        return len(self._clients)

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                if self._closed:
                    return
                time.sleep(0.05)  # e.g. EMFILE: the host is short of fds; retry rather than stop serving
                continue
            with self._lock:
                admitted = not self._closed and len(self._clients) < self.max_connections
                if admitted:
                    self._clients.add(client)
                    self._open.add(client)
                else:
                    self.refused += 1
            if not admitted:
                client.close()
                continue
            threading.Thread(target=self._run, args=(client,), daemon=True).start()

    def _run(self, client: socket.socket) -> None:
        upstream = None
        try:
            upstream = self._connect()
            with self._lock:
                self._open.add(upstream)
                closed = self._closed
            if not closed:
                _join(client, upstream)
        except OSError:
            pass
        finally:
            with self._lock:
                self._clients.discard(client)
                self._open.discard(client)
                self._open.discard(upstream)
            for sock in (client, upstream):
                if sock is not None:
                    sock.close()

    def close(self) -> None:
        """Stop accepting and shut every open connection down (their threads then end); never raises."""
        with self._lock:
            self._closed = True
            conns = list(self._open)
        for sock in (self.listener, *conns):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        try:
            self.listener.close()
        except OSError:
            pass


def unix_to_tcp(path: str, port: int, host: str = "127.0.0.1",
                max_connections: int = MAX_CONNECTIONS) -> Relay:
    """Listen on the Unix socket ``path`` (mode 0666) and relay to ``host:port`` in daemon threads, at most
    ``max_connections`` at once (:class:`Relay`); close the returned relay to stop."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o666)
    listener.listen(64)
    return Relay(listener, lambda: socket.create_connection((host, port)), max_connections)


def tcp_to_unix(port: int, path: str):
    """(listener on ``127.0.0.1:port``, a function connecting to the Unix socket ``path``): run :func:`serve`
    on them."""
    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        return s
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    return listener, connect


def main(argv: list[str]) -> int:
    port, path = int(argv[0]), argv[1]
    listener, connect = tcp_to_unix(port, path)
    if len(argv) > 2:
        open(argv[2], "w").close()  # the ready file: the port is listening
    serve(listener, connect)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
