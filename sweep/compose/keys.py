"""The key table: every config key's kind, range and meaning, declared once (:data:`RULES`).

Each key has exactly one rule, next to what its number means, as SGLang's
``arg_groups`` declare each option once with its help: :mod:`sweep.compose.bounds`
checks values against it, ``docs/config-keys.md`` is generated from it, and the
bad-input tests are generated from it. Upper bounds are far beyond any real
box and small enough to catch a typo (a zero too many). A key ending in ``.*``
gives the rule of every child of that mapping; a ``mapping`` rule leaves its
subtree free-form (the server's flag mapping, a spec's render blocks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sweep.launch import BACKENDS, FAILURE_REASONS

# ---------------------------------------------------------------------------- maxima
MAX_GPUS = 1024            # GPUs in one box
MAX_CONTEXT = 10_485_760   # tokens: the longest context any served model has (10M)
MAX_SPEC = 1024            # draft tokens / tree nodes / steps per verify: real values are <= 64
MAX_CONCURRENCY = 100_000  # in-flight requests of one cell (the harness caps at its file limit)
MAX_REQUESTS = 1_000_000   # requests of one cell: hours of load at any real rate
MAX_SECONDS = 86_400       # one day
MAX_PORT = 65_535
MAX_SEED = 2**32 - 1
MAX_TRIALS = 1_000_000     # trials of one study

SIM_FAULTS = ("cuda_graph", "oom", "hang", "missing_module", "python_headers")  # sweep/sim/flags.yaml
CODING_EVALS = ("five", "humaneval", "off")
SANDBOX_MECHANISMS = ("auto", "bwrap", "fallback")   # docs/sandbox.md
OBJECTIVE_METRICS = ("tok_s_lowc", "tok_s_peak", "cell", "weighted_mean", "goodput", "max_load",
                     "tok_s_c1")  # tok_s_c1: old name
# What objective.metrics (a multi-objective study's values) may name: the trial's headline metrics
STUDY_METRICS = ("tok_s_lowc", "tok_s_peak", "per_stream_tok_s_lowc", "goodput_tok_s", "max_load",
                 "accept_len", "speedup_vs_baseline", "tok_s_c1")
LOAD_SEARCH_OVER = ("concurrency", "rate")             # workload.max_load.over
LAUNCHERS = tuple(BACKENDS)  # sweep/launch.py: the backend table
LAUNCH_MODES = ("systemd", "process")
HOST_KEY_POLICIES = ("reject", "accept-new")
ENDPOINTS = ("completions", "chat")                  # server.endpoint (docs/ARCHITECTURE.md)
PROMPT_SOURCES = ("text", "edit", "prose", "random_ids", "dataset")  # workload.prompt_source
DTYPES = ("auto", "bfloat16", "float16", "float32")  # hardware.cpu.dtype (vLLM --dtype)
MODEL_FORMATS = ("hf", "gguf")                      # server.model_format: a model group's paths.<form>
SWEEPER_QUIRKS = ("avoid", "workaround", "ignore")   # hydra.sweeper.quirks (docs/search.md)


@dataclass(frozen=True, slots=True)
class Rule:
    """One key: its kind, its range (numbers, list items), its choices (enums)."""

    kind: str
    lo: float | None = None
    hi: float | None = None
    choices: tuple[Any, ...] = ()
    required: bool = False
    what: str = ""  # what a number counts, shown in messages and docs/config-keys.md
    fmt: str = ""   # kind "file": what the file holds (sweep/compose/input_files.py)
    lo_open: bool = False  # lo itself is refused: a limit of 0 ms is no limit anyone can meet


def _int(lo: float, hi: float, what: str = "", required: bool = False) -> Rule:
    return Rule("int", lo, hi, required=required, what=what)


def _num(lo: float, hi: float, what: str = "", required: bool = False) -> Rule:
    return Rule("float", lo, hi, required=required, what=what)


def _positive(hi: float, what: str = "") -> Rule:
    """A number > 0 (and <= hi): a latency limit, a rate."""
    return Rule("float", 0, hi, what=what, lo_open=True)


def _enum(*choices: Any, required: bool = False) -> Rule:
    return Rule("enum", choices=choices, required=required)


BOOL = Rule("bool")
NAME = Rule("name")
REQUIRED_NAME = Rule("name", required=True)
PATH = Rule("path")
OUTDIR = Rule("outdir")    # a directory written to: it exists and is writable, or can be made
SUBPATH = Rule("subpath")  # relative, stays inside the directory it is joined to


def _file(fmt: str) -> Rule:
    """A local file read before anything starts: regular, non-empty, and holding ``fmt``."""
    return Rule("file", fmt=fmt)

MAPPING = Rule("mapping")
TEXT = Rule("str")

# Subtrees no rule looks inside, and what checks them instead. Everything else a composed
# config holds has a rule (tests/compose/test_key_coverage.py composes every group option and
# fails on a key that has neither): a new key gets a row in RULES, or a line here saying why not.
FREE_FORM: dict[str, str] = {
    "server.args": "flags rendered into argv words, never a shell (sweep/compose/render.py)",
    "server.env": "environment of the server, rendered like server.args",
    "server.extra_env": "environment of the server, rendered like server.args",
    "server.sim_args": "the simulator's flags, rendered like server.args",
    "spec.render": "per-engine flags of a spec, rendered like server.args",
    "server.request_extras": "fields of every request's JSON body (sweep/bench/client.py)",
    "server.tokenize": "checked by sweep/compose/bench_checks.py",
    "server.acceptance": "checked by sweep/compose/acceptance_checks.py",
    "server.group_defaults": "group names, checked by sweep/compose/group_defaults.py",
    "hardware.quirks.rules": "rules, checked by sweep/compose/constraints.py",
    "spec.constraints": "rules, checked by sweep/compose/constraints.py",
    "launcher.hosts": "entries checked by sweep/compose/hosts.py with the launcher keys' rules",
    "server.install.optional": "optional packages, each tried and recorded by sweep/engines/_venv.py",
}

RULES: dict[str, Rule] = {
    # -- top level
    "dry_run": BOOL,
    "baseline.auto_run": _enum(True, False, "auto"),  # auto: real engines only (not server=sim)
    "results.search_dirs": Rule("paths"),
    "resume.rerun_failed": BOOL,
    "resume.deterministic_failures": Rule("enums", choices=FAILURE_REASONS),  # a typo never matched
    "secret_names": Rule("strs"),
    # -- hardware
    "hardware.name": REQUIRED_NAME,
    "hardware.gpu": TEXT,
    "hardware.arch": Rule("name", required=True),
    "hardware.interconnect": TEXT,
    "hardware.num_gpus": _int(0, MAX_GPUS, "GPUs; 0: a CPU box", required=True),
    "hardware.memory_gb": _num(0, 100_000, "GB per GPU", required=True),
    "hardware.tp": _int(1, MAX_GPUS, "GPUs", required=True),
    "hardware.ep": _int(1, MAX_GPUS, "GPUs", required=True),
    "hardware.dp": _int(1, MAX_GPUS, "GPUs", required=True),
    "hardware.dp_attention": BOOL,
    # prefill and decode on separate nodes: the twin models one box running both, and refuses it
    "hardware.disaggregated": BOOL,
    "hardware.cost_per_hour": _num(0, 1_000_000, "USD per hour"),
    "hardware.spread": _num(0, 1, "relative standard deviation of one measurement of a cell's tok/s"),
    "hardware.perf": MAPPING,
    "hardware.perf.mem_bw_tbs": _num(0, 1_000, "TB/s per GPU"),
    "hardware.perf.fp8_tflops": _num(0, 1_000_000, "TFLOP/s per GPU"),
    "hardware.perf.bf16_tflops": _num(0, 1_000_000, "TFLOP/s per GPU, dense BF16 (a model with arch.compute_bits 16)"),
    "hardware.perf.fp4_tflops": _num(0, 1_000_000, "TFLOP/s per GPU, dense FP4 (a model with arch.compute_bits 4)"),
    "hardware.perf.link_bw_gbs": _num(0, 100_000, "GB/s per direction"),
    "hardware.perf.link_latency_us": _num(0, 1_000_000, "microseconds"),
    "hardware.perf.nvlink": BOOL,
    "hardware.perf.pcie_domains": _int(1, MAX_GPUS, "PCIe switches the GPUs sit behind"),
    "hardware.perf.domain_link_bw_gbs": _num(0, 100_000, "GB/s per direction between switches"),
    "hardware.perf.matmul_tflops": _num(0, 1_000_000, "TFLOP/s measured (a CPU box: python -m sweep.sim.probe)"),
    "hardware.perf.probe": TEXT,
    # whose figures a calibrated prediction runs on: the calibration's (the figures its points ran
    # with) or these (docs/simulator.md, "Predictions with honesty")
    "hardware.perf.figures": _enum(None, "calibration", "config"),
    "hardware.perf.calibration": _file("calibration"),  # or none
    "hardware.quirks": MAPPING,
    "hardware.quirks.cuda_graph_max_budget": _int(0, MAX_SPEC, "draft tokens"),
    "hardware.quirks.rules": Rule("list"),  # its entries: sweep/compose/constraints.py
    "hardware.cpu": MAPPING,  # how a CPU engine runs on a CPU box (conf/hardware/cpu.yaml)
    "hardware.cpu.eager": BOOL,
    "hardware.cpu.kv_cache_gib": _num(0.1, 100_000, "GiB of KV cache (VLLM_CPU_KVCACHE_SPACE)"),
    "hardware.cpu.threads_bind": Rule("cpus"),
    "hardware.cpu.dtype": _enum(None, *DTYPES),
    # -- spec
    "spec.algorithm": REQUIRED_NAME,
    "spec.budget": _int(1, MAX_SPEC, "draft tokens per step"),
    "spec.topk": _int(1, MAX_SPEC, "branches per node"),
    "spec.window": _int(1, MAX_CONTEXT, "tokens"),
    "spec.block": _int(1, MAX_SPEC, "tokens per draft block"),
    "spec.num_steps": _int(1, MAX_SPEC, "draft steps"),
    "spec.draft_family": NAME,
    "spec.draft_n_min": _int(0, MAX_SPEC, "draft tokens"),
    "spec.draft_p_min": _num(0, 1, "probability"),
    "spec.ngram_type": NAME,
    "spec.ngram_n_min": _int(1, MAX_SPEC, "tokens"),
    "spec.ngram_n_max": _int(1, MAX_SPEC, "tokens"),
    "spec.ngram_n_match": _int(1, MAX_SPEC, "tokens"),
    "spec.synth_len": _num(1, MAX_SPEC + 1, "tokens per step"),
    "spec.synth_rates": Rule("floats", 0, 1, what="probabilities"),
    # per-load speculation: [from, to, budget] per band of in-flight requests (the engine's batch size),
    # inclusive, sorted, the first from 1; budget 0 = no draft there (docs/vllm.md, "Per-load speculation")
    "spec.accept_length": _num(1, MAX_SPEC + 1, "tokens per verify step a source measured (null: the twin's model)"),
    "spec.accept_source": TEXT,      # where spec.accept_length was measured (printed with the prediction)
    "spec.adaptive": BOOL,           # adaptive verification (the draft length chosen per step): not modelled
    "spec.per_load": Rule("per_load", 0, MAX_SPEC, what="[from, to, draft tokens] per band of batch sizes"),
    "spec.render": MAPPING,
    "spec.constraints": Rule("list"),  # expressions: sweep/compose/constraints.py
    "spec.requires": Rule("strs"),     # optional engine packages (the install records them)
    "spec.suffix_max_tree_depth": _int(1, MAX_SPEC, "tokens"),
    "spec.suffix_max_spec_factor": _num(0, 1000, "draft tokens per matched token"),
    "spec.suffix_min_token_prob": _num(0, 1, "probability"),
    "spec.suffix_max_cached_requests": _int(0, MAX_REQUESTS, "requests"),
    # -- model
    "model.name": REQUIRED_NAME,
    # model.path is ${model.paths.<server.model_format>} where a model has several forms: the
    # forms are checked first, so a bad one is named by its own key, not by model.path
    "model.paths": MAPPING,   # the model per on-disk form (server.model_format picks model.path)
    "model.paths.*": PATH,
    "model.path": PATH,
    "model.served_name": Rule("str", required=True),
    "model.context_length": _int(1, MAX_CONTEXT, "tokens", required=True),
    "model.trust_remote_code": BOOL,
    # model.draft_paths.draft is ${model.drafts.<server.model_format>}: the forms first (as model.paths)
    "model.drafts": MAPPING,  # the draft per on-disk form (model.draft_paths.draft)
    "model.drafts.*": PATH,
    "model.draft_paths": MAPPING,
    "model.draft_paths.*": PATH,
    "model.arch": MAPPING,
    "model.arch.*": Rule("figure"),
    "model.install": MAPPING,  # the weights' install steps, one mapping per step (sweep/engines/_weights.py)
    "model.install.*": MAPPING,
    "model.install.*.kind": NAME,      # the step's function (sweep/engines STEPS)
    "model.install.*.package": NAME,
    "model.install.*.version": NAME,
    "model.install.*.file": NAME,
    "model.install.*.member": PATH,
    "model.install.*.source": PATH,
    "model.install.*.dest": PATH,
    "model.install.*.dtype": _enum(None, *DTYPES),
    "model.install.*.layers": _int(1, 1_000, "layers of a random draft"),
    "model.install.*.hidden": _int(1, 1_000_000, "hidden size of a random draft"),
    "model.install.*.heads": _int(1, 10_000, "attention heads of a random draft"),
    "model.install.*.ff": _int(1, 10_000_000, "feed-forward size of a random draft"),
    "model.install.*.seed": _int(0, MAX_SEED, "seed"),
    # -- server
    "server.name": REQUIRED_NAME,
    "server.flavor": REQUIRED_NAME,
    "server.model_format": _enum(*MODEL_FORMATS),
    "server.simulated": BOOL,
    "server.engine": _enum(None, "sglang", "vllm", "trtllm"),  # whose step overheads the twin runs with
    "server.executable": Rule("strs", required=True),
    "server.host": Rule("host", required=True),
    "server.port": _int(1, MAX_PORT, "TCP port", required=True),
    "server.disable_cuda_graph": BOOL,
    "server.skip_server_warmup": BOOL,
    "server.enable_metrics": BOOL,
    "server.kv_unified": BOOL,
    "server.health_path": Rule("url_path"),
    "server.info_paths": Rule("url_paths"),
    "server.api_key": TEXT,
    "server.extra_args": Rule("strs"),
    "server.extra_env": MAPPING,
    "server.secret_flags": Rule("strs"),
    # why spec.per_load cannot run on this server (null: the spec's render carries it), said in one line
    "server.per_load_refusal": TEXT,
    "server.plumbing": MAPPING,       # launch flags/env that do not make another config (sweep/score/configs.py)
    "server.plumbing.args": Rule("strs"),
    "server.plumbing.env": Rule("strs"),
    "server.args": MAPPING,
    "server.env": MAPPING,
    "server.sim_args": MAPPING,
    "server.request_extras": MAPPING,
    "server.endpoint": _enum(*ENDPOINTS),
    "server.tokenize": MAPPING,  # its fields: sweep/compose/bench_checks.py
    "server.continuous_usage": BOOL,
    "server.prefix_caching": BOOL,    # before prefix_cache.kept, which interpolates it (errors name the source)
    "server.prefix_cache": MAPPING,
    "server.prefix_cache.kept": BOOL,
    "server.prefix_cache.flush_path": Rule("url_path"),
    "server.acceptance": MAPPING,
    "server.install": MAPPING,  # how python -m sweep.engines installs the engine (sweep/engines/)
    "server.install.kind": NAME,          # the install method (sweep/engines METHODS)
    "server.install.model": NAME,         # the model group installed with it by default
    "server.install.package": NAME,
    "server.install.version": NAME,
    "server.install.source_subdir": SUBPATH,
    "server.install.cpu_target": NAME,
    "server.install.dir": PATH,
    "server.install.binary": NAME,
    "server.install.target": NAME,
    "server.install.jobs": _int(1, 4096, "parallel build jobs"),
    "server.install.configure": Rule("strs"),
    "server.install.python": PATH,
    "server.install.requirements": Rule("strs"),
    "server.install.remove": Rule("strs"),
    "server.install.check": TEXT,
    "server.install.optional": Rule("list"),   # its entries: sweep/engines/_venv.py
    "server.install.min_free_gb": _num(0, 1_000_000, "GB free on the engines cache's disk"),
    "server.install.min_mem_gb": _num(0, 1_000_000, "GB of memory on this machine"),
    "server.group_defaults": MAPPING,
    "server.decode_log_interval": _int(1, MAX_REQUESTS, "decode steps"),
    "server.mem_fraction_static": _num(0, 1, "fraction of GPU memory"),
    "server.max_running_requests": _int(1, MAX_CONCURRENCY, "requests"),
    "server.threads": _int(1, 4096, "CPU threads"),
    "server.parallel": _int(1, 4096, "slots"),
    "server.seed": _int(0, MAX_SEED, "seed"),
    "server.max_num_batched_tokens": _int(1, MAX_CONTEXT, "tokens per scheduler step"),
    "server.sim": MAPPING,
    "server.sim.load_seconds": _num(0, 3600, "seconds"),
    "server.sim.seed": _int(0, MAX_SEED, "seed"),
    "server.sim.time_scale": _num(0, 1000, "x real time"),
    "server.sim.tokenizer": _file("tokenizer"),
    "server.sim.noise": _num(0, 1, "fraction of step time"),
    "server.sim.faults": MAPPING,
    "server.sim.faults.startup": _enum(None, *SIM_FAULTS),
    "server.sim.faults.crash_after_requests": _int(1, MAX_REQUESTS, "requests"),
    "server.sim.faults.wrong_answer_rate": _num(0, 1, "fraction"),
    "server.sim.faults.slow_start_seconds": _num(0, 3600, "seconds"),
    # -- launcher (both)
    "launcher.name": _enum(*LAUNCHERS, required=True),
    "launcher.ready_timeout_s": _num(0, MAX_SECONDS, "seconds", required=True),
    "launcher.poll_interval_s": _num(0.01, 3600, "seconds", required=True),
    "launcher.poll_max_s": _num(0.01, 3600, "seconds", required=True),
    "launcher.stop_grace_s": _num(0, 3600, "seconds", required=True),
    "launcher.keep_server": Rule("bool", required=True),
    "launcher.log_tail_lines": _int(1, 100_000, "lines", required=True),
    "launcher.reap_grace_s": _num(0, 60, "seconds"),
    "launcher.hosts": Rule("list"),
    # -- launcher=local
    "launcher.state_dir": OUTDIR,
    # -- launcher=ssh
    "launcher.host": Rule("ssh_host"),
    "launcher.port": _int(1, MAX_PORT, "TCP port"),
    "launcher.user": Rule("user"),
    "launcher.key_filename": Rule("paths"),
    "launcher.gateway": Rule("gateway"),
    "launcher.connect_timeout": _num(0.1, 3600, "seconds"),
    "launcher.known_hosts": PATH,
    "launcher.host_key_policy": _enum(*HOST_KEY_POLICIES),
    "launcher.allow_agent": BOOL,
    "launcher.mode": _enum(*LAUNCH_MODES),
    "launcher.unit": Rule("unit"),
    "launcher.unit_dir": Rule("abspath"),
    "launcher.dropin": BOOL,
    "launcher.sudo": BOOL,
    "launcher.workdir": Rule("remote_dir"),
    "launcher.port_forward": BOOL,
    "launcher.preflight": BOOL,
    "launcher.min_free_gb": _num(0, 1_000_000, "GB"),
    "launcher.remote_lease_s": _num(0, 3600, "seconds"),
    # -- launcher=slurm (docs/cluster.md): each trial one job; sbatch's own option names
    "launcher.sbatch": MAPPING,  # only the keys below (sweep/compose/settings.py refuses others)
    "launcher.sbatch.partition": NAME,
    "launcher.sbatch.account": NAME,
    "launcher.sbatch.qos": NAME,
    "launcher.sbatch.reservation": NAME,
    "launcher.sbatch.time": Rule("slurm_time", what="SLURM time limit (minutes, H:MM:SS, D-HH ...)"),
    "launcher.sbatch.gres": Rule("gres", what="generic resources per node, e.g. gpu:8 or gpu:h100:8"),
    "launcher.sbatch.gpus_per_node": _int(0, MAX_GPUS, "GPUs"),
    "launcher.sbatch.exclusive": BOOL,
    "launcher.sbatch.cpus_per_task": _int(1, 4096, "CPUs"),
    "launcher.sbatch.mem": Rule("slurm_mem", what="memory per node, e.g. 64G (0: all of it)"),
    "launcher.sbatch.constraint": Rule("slurm_constraint", what="node features, e.g. h100&ib"),
    "launcher.sbatch_extra": Rule("sbatch_args", what="more sbatch options, --name=value each"),
    "launcher.setup": Rule("lines", what="shell lines run in the job before the trial"),
    "launcher.command": Rule("strs"),
    "launcher.signal_s": _int(0, MAX_SECONDS, "seconds before the time limit (SIGUSR1)"),
    "launcher.poll_s": _num(0.1, 3600, "seconds"),
    "launcher.max_requeue": _int(0, 100, "runs again of a config whose job was lost"),
    "launcher.job_name": NAME,
    "launcher.free_port": BOOL,
    # -- workload
    "workload.name": NAME,
    "workload.contexts": Rule("ints", 1, MAX_CONTEXT, required=True, what="prompt tokens"),
    "workload.concurrency": Rule("ints", 1, MAX_CONCURRENCY, required=True, what="in-flight requests"),
    "workload.max_tokens": _int(1, MAX_CONTEXT, "new tokens per request", required=True),
    "workload.cells": Rule("cells", 1, MAX_CONTEXT, what="[context, concurrency] pairs of the matrix"),
    "workload.requests_per_cell": _int(1, MAX_REQUESTS, "requests"),
    "workload.min_requests": _int(1, MAX_REQUESTS, "requests"),
    "workload.warmup_requests": _int(0, MAX_REQUESTS, "requests"),
    "workload.request_rate": _num(0, 1_000_000, "requests/s; null: closed loop"),
    "workload.temperature": _num(0, 2, "sampling temperature"),
    "workload.ignore_eos": BOOL,
    "workload.flush_cache": BOOL,
    "workload.request_timeout_s": _num(1, MAX_SECONDS, "seconds"),
    "workload.max_error_rate": _num(0, 1, "failed / sent requests"),
    "workload.prompt_source": _enum(*PROMPT_SOURCES),
    "workload.endpoint": _enum(None, *ENDPOINTS),  # null: the server's (server.endpoint)
    "workload.dataset_path": _file("jsonl"),
    "workload.seed": _int(0, MAX_SEED, "seed"),
    "workload.repeats": _int(1, 100, "measurements per cell"),
    # the box's state around each measurement (sweep/bench/boxstate.py): what a busy box gets
    "workload.busy_box": _enum("mark", "wait", "refuse"),
    "workload.busy_wait_s": _num(0, MAX_SECONDS, "seconds to wait for a busy box to settle"),
    "workload.busy_load": _num(0.01, 4096, "cores' worth of other work on the engine's cores that is busy"),
    "workload.max_load": MAPPING,
    "workload.max_load.enabled": BOOL,
    "workload.max_load.over": _enum(*LOAD_SEARCH_OVER),
    "workload.max_load.start": _num(0.001, MAX_CONCURRENCY, "in-flight requests or requests/s"),
    "workload.max_load.max": _num(0.001, MAX_CONCURRENCY, "in-flight requests or requests/s"),
    "workload.max_load.tolerance": _num(0.001, 1, "(missed - met) / met"),
    "workload.max_load.max_rounds": _int(0, 64, "bisection probes"),
    "workload.max_load.concurrency": _int(1, MAX_CONCURRENCY, "in-flight cap (over=rate)"),
    "workload.coding": _enum(*CODING_EVALS, False, None),
    "workload.coding_max_tokens": _int(1, MAX_CONTEXT, "new tokens"),
    "workload.humaneval_limit": _int(1, 164, "problems (HumanEval has 164)"),
    "workload.identity": MAPPING,  # the greedy-identity pass (sweep/bench/identity.py)
    "workload.identity.prompts": _int(0, 1000, "prompts; 0: no pass"),
    "workload.identity.max_tokens": _int(1, MAX_CONTEXT, "new tokens per answer"),
    "workload.identity.context": _int(1, MAX_CONTEXT, "prompt tokens; null: the first of workload.contexts"),
    "workload.sandbox": MAPPING,
    "workload.sandbox.timeout_s": _num(0.1, 3600, "seconds"),
    "workload.sandbox.memory_mb": _int(16, 1_048_576, "MB"),
    "workload.sandbox.mechanism": _enum(*SANDBOX_MECHANISMS),
    # -- mlflow
    "mlflow.enabled": Rule("bool", required=True),
    "mlflow.tracking_uri": Rule("uri"),
    "mlflow.experiment": Rule("str", required=True),
    "mlflow.timeout_s": _num(0.5, 600, "seconds"),
    # -- objective
    "objective.metric": _enum(*OBJECTIVE_METRICS, required=True),
    "objective.context": _int(1, MAX_CONTEXT, "prompt tokens"),
    "objective.concurrency": _int(1, MAX_CONCURRENCY, "in-flight requests"),
    "objective.weights": MAPPING,
    "objective.weights.*": _num(0, 1_000_000, "weight"),
    "objective.constraints": MAPPING,
    "objective.margin": _num(0, 0.5, "fraction of tok/s within which configs count as equal (the verdicts' margin)"),
    "objective.constraints.coding_pass_rate_min": _num(0, 1, "fraction"),
    "objective.constraints.max_errors": _num(0, MAX_REQUESTS, "failed requests"),
    "objective.constraints.ttft_ms_p99_max": _num(0, MAX_SECONDS * 1000, "ms"),
    "objective.constraints.greedy_identical_min": _num(0, 1, "fraction of greedy answers equal to the baseline's"),
    "objective.slo": MAPPING,
    # a limit is > 0: a limit of 0 ms is met by no request ("SLO 0%"); null: not limited
    "objective.slo.ttft_ms": _positive(MAX_SECONDS * 1000, "ms per request"),
    "objective.slo.tpot_ms": _positive(MAX_SECONDS * 1000, "ms per output token after the first"),
    "objective.slo.itl_ms": _positive(MAX_SECONDS * 1000, "ms between tokens, at the percentile"),
    "objective.slo.e2e_ms": _positive(MAX_SECONDS * 1000, "ms per request"),
    "objective.slo.percentile": _num(1, 100, "% of requests that must meet every limit"),
    "objective.metrics": Rule("strs"),  # STUDY_METRICS, checked by sweep/compose/settings.py
    # -- Hydra's keys a run depends on (composed with the hydra node: sweep/compose/cmdline.py)
    "hydra.run.dir": OUTDIR,
    "hydra.sweep.dir": OUTDIR,
    "hydra.sweep.subdir": SUBPATH,
    "hydra.output_subdir": SUBPATH,
    "hydra.job.name": NAME,
    # -- hydra/sweeper=optuna (hydra_plugins/specsweep_optuna_sweeper/config.py, docs/search.md)
    "hydra.sweeper.direction": Rule("directions"),
    "hydra.sweeper.n_trials": _int(1, MAX_TRIALS, "trials in the whole study"),
    # more than 1 only where trials run as jobs (launcher=slurm); the sweeper says so otherwise
    "hydra.sweeper.n_jobs": _int(1, 4096, "trials in flight at once"),
    "hydra.sweeper.seed": _int(0, MAX_SEED, "seed"),
    "hydra.sweeper.storage": Rule("storage"),
    "hydra.sweeper.study_name": TEXT,
    "hydra.sweeper.heartbeat_interval": _num(0.05, 3600, "seconds"),
    "hydra.sweeper.stale_after": _num(1, 30 * MAX_SECONDS, "seconds"),
    "hydra.sweeper.quirks": _enum(*SWEEPER_QUIRKS),
    "hydra.sweeper.prescreen.top_k": _int(0, MAX_TRIALS, "configs run first"),
    "hydra.sweeper.prescreen.calibration": _file("calibration"),
    "hydra.sweeper.verify_rounds": _int(0, 100, "rounds verifying a per-load study's table (0: print the command)"),
    "hydra.sweeper.pool.max_restarts": _int(0, 1000, "restarts per host"),
    "hydra.sweeper.pool.restart_wait_s": _num(0, 3600, "seconds"),
}
