"""The Tinker API's HTTP routes (``/api/v1/...``) over a :class:`~trajkit.tinker.service.TinkerService`.

What the SDK (tinker 0.38.0) calls, read from its wheel: start-up ``POST client/config`` (answered with
``pjwt_auth_enabled: false`` and ``use_pyqwest_transport: false``: plain API-key auth over httpx),
``client/dynamic_config`` (404: none), ``create_session``, ``session_heartbeat`` every 10 s, ``telemetry``;
then ``get_server_capabilities``, ``create_model``, ``get_info``, ``forward_backward`` (protobuf body),
``optim_step``, ``save_weights``, ``save_weights_for_sampler``, ``load_weights``, ``create_sampling_session``,
``samplers/{id}``, ``asample``, ``retrieve_future``, ``training_runs/{id}`` (+ ``/checkpoints``) and
``weights_info``. Calls that do work answer a future (:mod:`trajkit.tinker.futures`) at once; the rest
answer directly. A direct call's user error is HTTP 400 with ``{"error", "category": "user", "detail"}``
(the SDK raises ``BadRequestError`` with that body); the server's own failure is a 500 with the error's
one-line text (its traceback goes to the log only).
"""
from __future__ import annotations

import asyncio
import logging

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from trajkit.errors import InputError, TrajkitError
from trajkit.tinker import fields, wire
from trajkit.tinker.futures import Futures
from trajkit.tinker.service import TinkerService

log = logging.getLogger("trajkit.tinker")
PROTO = "application/x-protobuf"
CLIENT_CONFIG = {"pjwt_auth_enabled": False, "use_pyqwest_transport": False, "proto_compress_fwdbwd": False,
                 "sample_use_retrieve_futures": False, "custom_loss_server_side": False,
                 "sample_join_sampling_session": False}


def create_app(service: TinkerService) -> FastAPI:
    app = FastAPI(title="trajkit tinker", docs_url=None, redoc_url=None)
    futures = Futures()
    app.state.service, app.state.futures = service, futures
    _errors(app)
    _session_routes(app, service)
    _training_routes(app, service, futures)
    _sampling_routes(app, service, futures)
    _future_routes(app, futures)
    app.router.on_shutdown.append(futures.close)
    return app


def _errors(app: FastAPI) -> None:
    @app.exception_handler(HTTPException)
    async def _no_route(request: Request, exc: HTTPException):
        # an unknown route (404) or method (405): say which, in the SDK's error form
        route = f"{request.method} {request.url.path}"
        text = (f"trajkit's Tinker server does not implement {route} (docs/tinker.md lists what it implements)"
                if exc.status_code in (404, 405) else f"{route}: {exc.detail}")
        return JSONResponse({"error": text, "category": "user", "detail": text}, status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _failed(_request: Request, exc: Exception):
        if isinstance(exc, TrajkitError):
            return JSONResponse({"error": str(exc), "category": "user", "detail": str(exc)}, status_code=400)
        log.exception("tinker request failed")
        text = f"internal error ({type(exc).__name__}: {exc})"
        return JSONResponse({"error": text, "category": "server", "detail": text}, status_code=500)


async def _json(request: Request, kind: str | None = None) -> dict:
    """The JSON object body; ``kind``: the SDK request type whose fields it is checked against (:mod:`.fields`)."""
    try:
        body = await request.json()
    except ValueError:
        raise InputError("the request body is not JSON", field="body") from None
    if not isinstance(body, dict):
        raise InputError("the request body must be a JSON object", field="body")
    if kind is not None:
        fields.check(kind, body)
    return body


def _future(request_id: str, **extra) -> dict:
    return {"request_id": request_id, **{k: v for k, v in extra.items() if v is not None}}


def _session_routes(app: FastAPI, service: TinkerService) -> None:
    @app.post("/api/v1/client/config")
    async def client_config():
        return CLIENT_CONFIG

    @app.post("/api/v1/client/dynamic_config")
    async def dynamic_config():
        return JSONResponse({"detail": "no dynamic config"}, status_code=404)

    @app.get("/api/v1/healthz")
    async def healthz():
        return {"status": "ok"}

    @app.post("/api/v1/create_session")
    async def create_session(request: Request):
        await _json(request, "CreateSessionRequest")
        return {"type": "create_session", "session_id": service.create_session()}

    @app.post("/api/v1/session_heartbeat")
    async def heartbeat(request: Request):
        await _json(request, "SessionHeartbeatRequest")
        return {"type": "session_heartbeat"}

    @app.post("/api/v1/telemetry")
    async def telemetry():
        return {"status": "accepted"}

    @app.get("/api/v1/get_server_capabilities")
    async def capabilities():
        return service.capabilities()

    @app.get("/api/v1/training_runs")
    async def training_runs(limit: int = 20, offset: int = 0):
        return service.training_runs(limit, offset)

    @app.get("/api/v1/training_runs/{model_id}")
    async def training_run(model_id: str):
        return service.training_run(model_id)

    @app.get("/api/v1/training_runs/{model_id}/checkpoints")
    async def checkpoints(model_id: str):
        return {"checkpoints": service.store.listing(model_id)}

    @app.post("/api/v1/weights_info")
    async def weights_info(request: Request):
        meta = service.store.meta(str((await _json(request)).get("tinker_path", "")))
        lora = meta["lora"]
        return {"base_model": meta["base_model"], "is_lora": True, "lora_rank": lora["rank"],
                "train_attn": "attention" in lora["targets"], "train_mlp": "mlp" in lora["targets"],
                "train_unembed": "unembed" in lora["targets"]}


def _training_routes(app: FastAPI, service: TinkerService, futures: Futures) -> None:
    @app.post("/api/v1/create_model")
    async def create_model(request: Request):
        b = await _json(request, "CreateModelRequest")
        fields.check("LoraConfig", b.get("lora_config") or {}, "lora_config.")
        rid = futures.submit(lambda: service.create_model(b["session_id"], int(b["model_seq_id"]),
                                                          b.get("base_model"), b.get("lora_config")))
        return _future(rid)

    @app.post("/api/v1/get_info")
    async def get_info(request: Request):
        b = await _json(request, "GetInfoRequest")
        return service.info(str(b.get("model_id")))

    @app.post("/api/v1/forward_backward")
    async def forward_backward(request: Request):
        if PROTO not in request.headers.get("content-type", ""):
            raise InputError(f"forward_backward takes a protobuf body (Content-Type: {PROTO})", field="body")
        req = wire.decode_forward_backward(await request.body())
        rid = futures.submit(lambda: wire.encode_forward_backward(*service.forward_backward(req)))
        return _future(rid, model_id=req["model_id"])

    @app.post("/api/v1/optim_step")
    async def optim_step(request: Request):
        b = await _json(request, "OptimStepRequest")
        adam = b.get("adam_params") or b.get("optimizer_params") or b.get("optim_params") or {}
        fields.check("AdamParams", adam, "adam_params.")
        rid = futures.submit(lambda: service.optim_step(str(b.get("model_id")), adam))
        return _future(rid, model_id=b.get("model_id"))

    @app.post("/api/v1/save_weights")
    async def save_weights(request: Request):
        b = await _json(request, "SaveWeightsRequest")
        rid = futures.submit(lambda: service.save_weights(str(b.get("model_id")), b.get("path")))
        return _future(rid, model_id=b.get("model_id"))

    @app.post("/api/v1/save_weights_for_sampler")
    async def save_for_sampler(request: Request):
        b = await _json(request, "SaveWeightsForSamplerRequest")
        model_id = str(b.get("model_id"))
        rid = futures.submit(lambda: service.save_for_sampler(model_id, b.get("path"), b.get("sampling_session_seq_id"),
                                                              model_id.split(":train:")[0]))
        return _future(rid, model_id=model_id)

    @app.post("/api/v1/load_weights")
    async def load_weights(request: Request):
        b = await _json(request, "LoadWeightsRequest")
        service.check_base(b.get("base_model"))
        rid = futures.submit(lambda: service.load_weights(b.get("model_id"), str(b.get("path")),
                                                          bool(b.get("optimizer")), b.get("session_id"),
                                                          b.get("model_seq_id")))
        return _future(rid, model_id=b.get("model_id"))


def _sampling_routes(app: FastAPI, service: TinkerService, futures: Futures) -> None:
    @app.post("/api/v1/create_sampling_session")
    async def create_sampling_session(request: Request):
        b = await _json(request, "CreateSamplingSessionRequest")
        sid = await asyncio.to_thread(futures.run, lambda: service.create_sampling_session(str(b.get("session_id")),
                                                                  int(b.get("sampling_session_seq_id", 0)),
                                                                  b.get("base_model"), b.get("model_path")))
        return {"type": "create_sampling_session", "sampling_session_id": sid}

    @app.get("/api/v1/samplers/{sampler_id}")
    async def sampler(sampler_id: str):
        s = service.session(sampler_id)
        return {"sampler_id": sampler_id, "base_model": s.base_model, "model_path": s.model_path}

    @app.post("/api/v1/asample")
    async def asample(request: Request):
        b = await _json(request)
        rid = futures.submit(lambda: wire.encode_sample(service.sample(b)))
        n = int(b.get("num_samples", 1))
        return _future(rid, sample_sequence_ids=[f"{rid}:{i}" for i in range(n)])


def _future_routes(app: FastAPI, futures: Futures) -> None:
    @app.post("/api/v1/retrieve_future")
    async def retrieve(request: Request):
        rid = str((await _json(request, "FutureRetrieveRequest")).get("request_id"))
        job = await futures.get(rid)
        if job is None:
            return {"error": f"unknown request_id {rid!r}", "category": "user"}
        if not job.done.is_set():
            return {"type": "try_again", "request_id": rid, "queue_state": "active"}
        if job.error is not None:
            return job.error
        if isinstance(job.result, bytes):
            return Response(job.result, media_type=PROTO)
        return job.result
