"""The simulator's HTTP app (Starlette): SGLang's endpoints over the engine.

Readiness follows SGLang: /health and /health_generate answer 503 until the
emulated load (and warmup) is over, then 200; generation endpoints refuse
with 503 meanwhile. The api key, when set, guards everything but health.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any, Awaitable, Callable, MutableMapping

from starlette.applications import Starlette
from starlette.requests import Request as HttpRequest
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from sweep.secrets import MASK
from sweep.sim import faults, metrics, perf, serving
from sweep.sim.cli import SimArgs
from sweep.sim.engine import Engine

VERSION = "0.5.23"
OPEN_PATHS = frozenset({"/health", "/health_generate", "/metrics"})
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


class SimState:
    """Everything the endpoints share: args, readiness, the engine, counters."""

    def __init__(self, args: SimArgs, engine: Engine, max_total_tokens: int) -> None:
        self.args = args
        self.engine = engine
        self.ready = False
        self.max_total_tokens = max_total_tokens
        self.generation_requests = 0
        self.spec_on = perf.family(args.spec) != "none"
        self.width = perf.verify_width(args.spec)
        self.started = time.time()


class SSEResponse:
    """A minimal streaming ASGI response: one send per yielded chunk, abort on disconnect."""

    def __init__(self, body: Any, on_disconnect: Callable[[], None]) -> None:
        self.body = body
        self.on_disconnect = on_disconnect

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Send) -> None:
        async def watch() -> None:
            while True:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    self.on_disconnect()
                    return

        watcher = asyncio.get_running_loop().create_task(watch())
        try:
            await send({"type": "http.response.start", "status": 200,
                        "headers": [(b"content-type", b"text/event-stream; charset=utf-8"),
                                    (b"cache-control", b"no-cache")]})
            async for chunk in self.body:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        except OSError:
            self.on_disconnect()
        finally:
            watcher.cancel()


def build_app(state: SimState) -> Starlette:
    args = state.args

    def not_ready() -> JSONResponse:
        return JSONResponse(serving.error_body("Server is not ready.", 503, "ServiceUnavailable"), 503)

    async def health(_: HttpRequest) -> Response:
        return Response(status_code=200 if state.ready else 503)

    async def models(_: HttpRequest) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{
            "id": args.served_model_name, "object": "model", "created": int(state.started),
            "owned_by": "sglang", "root": args.model_path, "parent": None,
            "max_model_len": args.context_length or 262144}]})

    async def model_info(_: HttpRequest) -> JSONResponse:
        arch = (args.model.get("arch") or {})
        return JSONResponse({
            "model_path": args.model_path, "tokenizer_path": args.tokenizer_path or args.model_path,
            "is_generation": True, "preferred_sampling_params": None, "weight_version": "default",
            "has_image_understanding": bool(arch.get("vision_tower")), "has_audio_understanding": False,
            "model_type": "kimi_k25" if arch.get("vision_tower") else "deepseek_v3",
            "architectures": ["KimiK25ForConditionalGeneration" if arch.get("vision_tower")
                              else "DeepseekV3ForCausalLM"]})

    async def server_info(_: HttpRequest) -> JSONResponse:
        st = state.engine.stats
        info = {k: v for k, v in vars(args.ns).items() if not k.startswith("sim_")}
        if info.get("api_key"):
            info["api_key"] = MASK
        avg = st.accept_tokens_total / st.verify_ct_total if st.verify_ct_total else 0.0
        info.update({
            "version": VERSION, "max_total_num_tokens": state.max_total_tokens,
            "internal_states": [{"avg_spec_accept_length": avg, "last_gen_throughput": st.gen_throughput,
                                 "memory_usage": {"weight": 0.0, "kvcache": 0.0}}],
            "simulated": True,
            "sim": {"hardware": args.hardware.get("name"), "spec": dict(args.spec),
                    "time_scale": args.sim_time_scale, "seed": args.sim_seed,
                    "calibration": state.engine.cal.source},
        })
        return JSONResponse(json.loads(json.dumps(info, default=str)))

    async def flush_cache(_: HttpRequest) -> Response:
        if state.engine.flush_cache():
            return PlainTextResponse("Cache flushed.\nPlease check backend logs for more details. (When there "
                                     "are running or waiting requests, the operation will not be performed.)\n")
        return PlainTextResponse("Cache not flushed: there are running or waiting requests.\n", 400)

    async def tokenize(request: HttpRequest) -> Response:
        try:
            body = json.loads(await request.body())
            if not isinstance(body, dict):
                raise serving.BadRequest("request body must be a JSON object")
            out = serving.tokenize(body, args.context_length or 262144)
        except (ValueError, serving.BadRequest) as exc:
            return JSONResponse(serving.error_body(str(exc)), 400)
        return Response(serving.dumps(out), media_type="application/json")

    async def metrics_ep(_: HttpRequest) -> Response:
        if not args.enable_metrics:
            return PlainTextResponse("Not Found", 404)
        state.engine.refresh_gauges()
        return PlainTextResponse(metrics.render(state), media_type="text/plain; version=0.0.4; charset=utf-8")

    def generation(kind: str) -> Callable[[bytes], Awaitable[Any]]:
        async def handler(raw: bytes) -> Any:
            if not state.ready:
                return not_ready()
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise serving.BadRequest("request body must be a JSON object")
                req, opts = serving.parse_request(
                    kind, body, seed=args.sim_seed, context_length=args.context_length or 262144,
                    wrong_answer_rate=args.sim_wrong_answer_rate)
            except (ValueError, serving.BadRequest) as exc:
                return JSONResponse(serving.error_body(str(exc)), 400)
            state.generation_requests += 1
            limit = args.sim_crash_after_requests
            if limit is not None and state.generation_requests > limit:
                faults.emit("crash", n=limit)
                os._exit(faults.EXIT_CODE)
            state.engine.submit(req)
            if body.get("stream"):
                gen = (serving.stream_generate(req, width=state.width, spec_on=state.spec_on)
                       if kind == "generate" else
                       serving.stream_openai(kind, req, opts, model=body.get("model") or args.served_model_name,
                                             width=state.width, spec_on=state.spec_on))
                return SSEResponse(gen, lambda: state.engine.abort(req))
            if kind == "generate":
                out = await serving.complete_generate(req, width=state.width, spec_on=state.spec_on)
            else:
                out = await serving.complete_openai(kind, req, opts,
                                                    model=body.get("model") or args.served_model_name,
                                                    width=state.width, spec_on=state.spec_on)
            return Response(serving.dumps(out), media_type="application/json")
        return handler

    # The generation endpoints are the hot path: served as plain ASGI, without
    # Starlette's routing and exception-middleware wrappers around every send.
    fast = {"/v1/chat/completions": generation("chat"), "/v1/completions": generation("completion"),
            "/generate": generation("generate")}
    bearer = f"Bearer {args.api_key}".encode() if args.api_key else None

    routes = [
        Route("/health", health, methods=["GET"]),
        Route("/health_generate", health, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/get_model_info", model_info, methods=["GET"]),
        Route("/model_info", model_info, methods=["GET"]),
        Route("/get_server_info", server_info, methods=["GET"]),
        Route("/server_info", server_info, methods=["GET"]),
        Route("/flush_cache", flush_cache, methods=["GET", "POST"]),
        Route("/metrics", metrics_ep, methods=["GET"]),
        Route("/v1/tokenize", tokenize, methods=["POST"]),
        Route("/tokenize", tokenize, methods=["POST"]),
    ]
    inner = Starlette(routes=routes)

    async def app(scope: dict[str, Any], receive: Any, send: Send) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        path = scope["path"]
        if bearer is not None and path not in OPEN_PATHS:
            if dict(scope.get("headers") or []).get(b"authorization") != bearer:
                await JSONResponse({"error": "Unauthorized"}, 401)(scope, receive, send)
                return
        handler = fast.get(path)
        if handler is None:
            await inner(scope, receive, send)
            return
        if scope["method"] != "POST":
            await PlainTextResponse("Method Not Allowed", 405)(scope, receive, send)
            return
        chunks = []
        while True:
            msg = await receive()
            chunks.append(msg.get("body", b""))
            if not msg.get("more_body"):
                break
        response = await handler(b"".join(chunks))
        await response(scope, receive, send)

    return app  # type: ignore[return-value]
