"""Process lifecycle: parse, bind, "load", fail or become ready, serve.

The port is bound first (a busy port fails at once with uvicorn's message,
as SGLang would print it), the HTTP server answers 503 during the emulated
load, and the load goes through SGLang's startup log sequence. Startup
faults -- asked for with the sim's fault option or reproduced from the
hardware's known quirks (perf.startup_failure) -- strike at the phase where
the real one does, print SGLang's text and exit non-zero.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
from typing import Sequence

from sweep.sim import cli, faults, logs, perf, tokens
from sweep.sim import text as textgen
from sweep.sim.app import SimState, build_app
from sweep.sim.constants import CalibrationError
from sweep.sim.engine import Engine

DEFAULT_MAX_RUNNING = 1024


def _hardware(args: cli.SimArgs) -> dict:
    hw = dict(args.hardware)
    hw.update({"tp": args.tp_size, "ep": args.ep_size, "dp": args.dp_size,
               "dp_attention": bool(args.enable_dp_attention)})
    hw.setdefault("num_gpus", args.tp_size)
    return hw


def _noise_seed(args: cli.SimArgs, hw: dict) -> str:
    """The drift's seed: the sim seed and what the server runs (not its port), so one
    config reproduces and two configs get independent noise (sweep/sim/noise.py)."""
    spec = ",".join(f"{k}={v}" for k, v in sorted(args.spec.items()))
    return f"{args.sim_seed}:{hw.get('name')}:tp{hw['tp']}:ep{hw['ep']}:{spec}:eager={args.disable_cuda_graph}"


def _bind(host: str, port: int) -> socket.socket | None:
    """The listening socket, created as an explicit TCP socket.

    Why ``IPPROTO_TCP`` and not the default protocol 0: asyncio turns
    TCP_NODELAY on for every accepted connection only when the socket's
    ``proto`` is IPPROTO_TCP (``base_events._set_nodelay``), and accepted
    sockets inherit the listener's proto. With proto 0 Nagle stays on, so
    on a reused keep-alive connection the response's second small write
    waits for the client's delayed ACK (~40 ms): a TTFT artefact no real
    server has.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        return None
    sock.listen(2048)
    sock.setblocking(False)
    return sock


def _die(kind: str, **values: object) -> None:
    faults.emit(kind, **values)
    sys.stderr.flush()
    os._exit(faults.EXIT_CODE)


async def _load(state: SimState, hw: dict, failure: str | None) -> None:
    """SGLang's startup sequence over the emulated load time; faults strike in their phase."""
    args = state.args
    total = max(0.0, float(args.sim_load_seconds)) + max(0.0, float(args.sim_slow_start_seconds))
    mem_gb = float(hw.get("memory_gb") or 80)
    sh = perf.shape(args.model)
    per_gpu = sh["weights_gb"] / max(1, args.tp_size)

    async def phase(frac: float) -> None:
        await asyncio.sleep(total * frac)

    logs.log(f"specsweep sim: performance model {state.engine.cal.source}")
    logs.scheduler("Init torch distributed begin.")
    await phase(0.05)
    logs.scheduler("Init torch distributed ends. mem usage=1.20 GB")
    if failure == "python_headers":
        _die("python_headers")
    logs.scheduler(f"Load weight begin. avail mem={mem_gb - 1.2:.2f} GB")
    textgen.filler_pool(int(args.sim_seed))  # build once now, not on the first request
    textgen.humaneval_index()
    await phase(0.65)
    if failure == "oom":
        _die("oom", mem_gb=mem_gb, used_gb=min(per_gpu, mem_gb), alloc_gb=max(0.0, min(per_gpu, mem_gb) - 1.5))
    logs.scheduler(logs.weights_loaded(args.model, args.tp_size, mem_gb, sh["weights_gb"]))
    kv_gb = state.max_total_tokens * sh["kv_bytes_token"] / 1e9
    logs.scheduler(f"KV Cache is allocated. #tokens: {state.max_total_tokens}, KV size: {kv_gb:.2f} GB")
    avail = max(0.0, mem_gb - per_gpu - kv_gb - 1.2)
    logs.scheduler(f"Memory pool end. avail mem={avail:.2f} GB")
    if failure == "cuda_graph":
        await phase(0.1)
        _die("cuda_graph", avail_gb=avail, width=state.width, arch=hw.get("arch", "?"))
    if failure == "hang":
        faults.emit("hang", avail_gb=avail)
        await asyncio.Event().wait()  # never ready
    if not args.disable_cuda_graph:
        logs.scheduler(f"Capture cuda graph begin. This can take up to several minutes. avail mem={avail:.2f} GB")
        await phase(0.2)
        logs.scheduler(f"Capture cuda graph end. Time elapsed: {total * 0.2:.2f} s. mem usage=1.85 GB. "
                       f"avail mem={max(0.0, avail - 1.85):.2f} GB.")
    else:
        await phase(0.2)
    logs.scheduler(f"max_total_num_tokens={state.max_total_tokens}, chunked_prefill_size="
                   f"{args.chunked_prefill_size or 8192}, max_prefill_tokens={args.max_prefill_tokens}, "
                   f"max_running_requests={state.engine.max_running}, context_len="
                   f"{args.context_length or 262144}, available_gpu_mem={max(0.0, avail - 1.85):.2f} GB")
    logs.log(f"INFO:     Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")
    await phase(0.05)
    if failure == "missing_module":
        _die("missing_module")
    if not args.skip_server_warmup:
        logs.log('INFO:     127.0.0.1:40000 - "POST /generate HTTP/1.1" 200 OK')
    state.engine.start()
    state.ready = True
    logs.log("The server is fired up and ready to roll!")


def _uvicorn_logging() -> dict:
    fmt = "[%(asctime)s] %(levelprefix)s %(message)s"
    access = '[%(asctime)s] %(levelprefix)s %(client_addr)s - "%(request_line)s" %(status_code)s'
    return {
        "version": 1, "disable_existing_loggers": False,
        "formatters": {
            "default": {"()": "uvicorn.logging.DefaultFormatter", "fmt": fmt,
                        "datefmt": "%Y-%m-%d %H:%M:%S", "use_colors": False},
            "access": {"()": "uvicorn.logging.AccessFormatter", "fmt": access,
                       "datefmt": "%Y-%m-%d %H:%M:%S", "use_colors": False},
        },
        "handlers": {
            "default": {"formatter": "default", "class": "logging.StreamHandler", "stream": "ext://sys.stderr"},
            "access": {"formatter": "access", "class": "logging.StreamHandler", "stream": "ext://sys.stderr"},
        },
        "loggers": {
            "uvicorn": {"handlers": ["default"], "level": "INFO", "propagate": False},
            "uvicorn.error": {"level": "INFO"},
            "uvicorn.access": {"handlers": ["access"], "level": "INFO", "propagate": False},
        },
    }


# SIGTERM: requests still running get this long, then are cancelled and the process exits
# (SGLang's own server exits on SIGTERM). Without it, a stream whose client had vanished
# kept uvicorn "waiting for background tasks" forever: a sim outlived its benchmark by hours.
SHUTDOWN_GRACE_S = 5  # seconds (uvicorn takes an int)


async def serve(args: cli.SimArgs) -> None:
    import uvicorn

    hw = _hardware(args)
    logs.log(logs.server_args_line(args.ns))
    try:
        tokens.configure(args.sim_tokenizer)
    except Exception as exc:  # noqa: BLE001 - any unreadable file: argparse-style refusal
        print(f"{cli.PROG}: error: argument --sim-tokenizer: cannot load {args.sim_tokenizer!r}: {exc}",
              file=sys.stderr)
        sys.exit(2)
    sock = _bind(args.host, args.port)
    if sock is None:
        _die("port_in_use", host=args.host, port=args.port)
        return
    flags = {"disable_cuda_graph": args.disable_cuda_graph, "skip_server_warmup": args.skip_server_warmup,
             "mem_fraction_static": args.mem_fraction_static}
    failure = args.sim_fault_startup or perf.startup_failure(hw, args.model, args.spec, flags)
    max_total = args.max_total_tokens or max(1, perf.kv_capacity_tokens(hw, args.model, args.mem_fraction_static))
    engine = Engine(hardware=hw, model=args.model, spec=args.spec, time_scale=float(args.sim_time_scale),
                    seed=int(args.sim_seed), max_running=args.max_running_requests or DEFAULT_MAX_RUNNING,
                    max_total_tokens=max_total, disable_cuda_graph=args.disable_cuda_graph,
                    cuda_graph_max_bs=args.cuda_graph_max_bs or perf.CUDA_GRAPH_MAX_BS,
                    decode_log_interval=args.decode_log_interval, log=logs.scheduler,
                    noise=float(args.sim_noise or 0.0), noise_seed=_noise_seed(args, hw))
    state = SimState(args, engine, max_total)
    config = uvicorn.Config(build_app(state), log_config=_uvicorn_logging(), access_log=args.log_requests,
                            lifespan="off", timeout_keep_alive=60, backlog=2048,
                            timeout_graceful_shutdown=SHUTDOWN_GRACE_S)
    server = uvicorn.Server(config)
    loader = asyncio.get_running_loop().create_task(_load(state, hw, failure))
    await server.serve(sockets=[sock])
    loader.cancel()


def main(argv: Sequence[str] | None = None) -> None:
    args = cli.parse(sys.argv[1:] if argv is None else argv)
    try:  # a bad calibration path is a usage error, before anything binds or loads
        perf.calibration(_hardware(args))
    except CalibrationError as exc:
        sys.stderr.write(exc.one_line() + "\n")
        sys.exit(2)
    logging.getLogger("asyncio").setLevel(logging.ERROR)
    try:
        asyncio.run(serve(args))
    except KeyboardInterrupt:
        pass
