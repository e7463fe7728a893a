"""The servers' logging: no request line ever reaches stdout, which commands such as ``trajkit envs check --json``
own. uvicorn's default config ran ``logging.config.dictConfig`` for every server and so put a stdout handler on
the access logger for a moment before ``access_log=False`` took it off; servers starting in several threads at
once (concurrent trials, each with its gateway) let a ``403 Forbidden`` request line into a fresh-clone CI
run's JSON. Now no server configures logging: by construction, not by timing."""
import logging
import logging.config
import threading
import urllib.error
import urllib.request

from fastapi import FastAPI, HTTPException

from trajkit.gateway.server import serving_in_thread, uvicorn_server


def _app() -> FastAPI:
    app = FastAPI()

    @app.get("/forbidden")
    def forbidden():
        raise HTTPException(status_code=403, detail="not yours")

    return app


def test_no_server_runs_dictconfig_and_the_access_logger_has_no_handler(monkeypatch):
    calls = []
    monkeypatch.setattr(logging.config, "dictConfig", lambda *args, **kwargs: calls.append(args))
    servers = []
    threads = [threading.Thread(target=lambda: servers.append(uvicorn_server(_app(), level)))
               for level in ("info", "warning", "info", "debug")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(servers) == 4 and calls == []
    access = logging.getLogger("uvicorn.access")
    assert access.handlers == [] and access.propagate is False


def test_requests_leave_stdout_empty_and_server_messages_go_to_stderr(capsys):
    with serving_in_thread(uvicorn_server(_app(), "info")) as url:
        for _ in range(3):
            try:
                urllib.request.urlopen(f"{url}/forbidden", timeout=10)
            except urllib.error.HTTPError as exc:
                assert exc.code == 403
            else:
                raise AssertionError("the route answers 403")
    out, err = capsys.readouterr()
    assert out == ""
    assert "Uvicorn running on" in err or "Started server process" in err  # uvicorn's own start-up line
    assert "GET /forbidden" not in err


def test_bad_bytes_on_the_wire_reach_stderr_only(capsys):
    """A client sending no HTTP at all (bytes a policy's tool call could send): uvicorn's warning about it
    goes to stderr, and stdout stays empty."""
    import socket
    import time
    from urllib.parse import urlparse

    with serving_in_thread(uvicorn_server(_app(), "info")) as url:
        where = urlparse(url)
        with socket.create_connection((where.hostname, where.port), timeout=10) as sock:
            sock.sendall(b"\xff\xfe\x00 NOT HTTP \r\n\x1b[31m\r\n\r\n")
            sock.settimeout(10)
            sock.recv(4096)  # the server answers 400 and closes
        time.sleep(0.1)
    out, err = capsys.readouterr()
    assert out == ""
    assert "Invalid HTTP request" in err
