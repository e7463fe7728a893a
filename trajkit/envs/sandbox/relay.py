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


def unix_to_tcp(path: str, port: int, host: str = "127.0.0.1") -> socket.socket:
    """Listen on the Unix socket ``path`` (mode 0666) and relay to ``host:port`` in a daemon thread; close the
    returned listener to stop."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o666)
    listener.listen(64)
    threading.Thread(target=serve, args=(listener, lambda: socket.create_connection((host, port))),
                     daemon=True).start()
    return listener


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
