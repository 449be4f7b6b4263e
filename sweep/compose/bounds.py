"""Every config key checked against its one rule (the table: :mod:`sweep.compose.keys`).

Why one table: a key checked in one place and not another is how a
``launcher.keep_server=maybe`` became ``True``, ``model.trust_remote_code=no``
reached the command line as ``--trust-remote-code no`` and
``workload.concurrency=[100000000]`` was accepted. Here each key has exactly
one rule -- its kind (integer, number, boolean, enum, host, path, systemd unit
name ...), its range and what the number means -- and the same rule checks a
composed config (:func:`check_config`), a value the typed config reads
(:func:`get`), a ``launcher.hosts`` entry and every value of an Optuna search
space before the study starts (:func:`check`). Rules across keys (``spec.topk``
<= ``spec.budget``, ``hardware.tp`` <= ``hardware.num_gpus``) stay with the
builders in :mod:`sweep.compose.config`.

``docs/config-keys.md`` is generated from the table (:func:`markdown`).
Free-form ``mapping`` subtrees (the server's flag mapping, a spec's render
blocks) are rendered by :mod:`sweep.compose.render` into argv words, never
into a shell.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any, Callable, Iterator, Mapping

from sweep.compose import input_files, storage_url
from sweep.compose.checks import no_control_chars
from sweep.compose.keys import (
    MAX_CONCURRENCY,
    MAX_PORT,
    RULES,
    Rule,
)
from sweep.errors import ConfigError

# ---------------------------------------------------------------------------- kinds

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,127}$")
_LABEL = re.compile(r"^(?!-)[A-Za-z0-9-]{1,63}(?<!-)$")
_ALIAS = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,252}$")
_USER = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}\$?$")
# systemd.unit(5): letters, digits, ":-_.\", one "@" for templates; at most 255 characters.
_UNIT = re.compile(r"^[A-Za-z0-9:_\\][A-Za-z0-9:_.\\-]*(@[A-Za-z0-9:_.\\-]*)?$")
_URL_PATH = re.compile(r"^/[A-Za-z0-9._~!$&'()*+,;=:@%/-]*$")
# vLLM's VLLM_CPU_OMP_THREADS_BIND: auto | nobind | core lists ("0-3,8"), one per rank ("0-1|2-3").
_CPUS = re.compile(r"^(auto|nobind|\d+(-\d+)?(,\d+(-\d+)?)*(\|\d+(-\d+)?(,\d+(-\d+)?)*)*)$")
# SLURM (sbatch(1)): --gres=gpu[:type]:count[,...]; --mem=<n>[K|M|G|T]; --constraint features
# name[:type][:count][,...]: a type starts with a letter/digit, a count is digits (gpu:-1 is no count)
_GRES_ONE = r"[A-Za-z0-9_]+(:[A-Za-z0-9_.][A-Za-z0-9_.-]*)?(:\d{1,6})?"
_GRES = re.compile(rf"^{_GRES_ONE}(,{_GRES_ONE})*$")
_SLURM_MEM = re.compile(r"^\d{1,12}[KMGT]?$")
_CONSTRAINT = re.compile(r"^[A-Za-z0-9_.&|,:*()\[\]-]{1,1024}$")
_SBATCH_ARG = re.compile(r"^--[a-z][a-z0-9-]{0,63}(=[^\s]{1,1024})?$")


def is_host(text: str) -> bool:
    """An IP address (v4, v6) or an RFC 1123 host name."""
    try:
        ipaddress.ip_address(text[1:-1] if text.startswith("[") and text.endswith("]") else text)
        return True
    except ValueError:
        pass
    name = text[:-1] if text.endswith(".") else text
    return 0 < len(name) <= 253 and all(_LABEL.match(label) for label in name.split("."))


def _type_name(value: Any) -> str:
    """The value as a message shows it: its repr (cut at 80 characters), or the container type."""
    if isinstance(value, (Mapping, list, tuple)):
        return "a mapping" if isinstance(value, Mapping) else "a list"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _fmt(x: float) -> str:
    """1000000, not 1e+06; 0.5 stays 0.5; an integer past any float as its first digits."""
    if isinstance(x, int) and abs(x) >= 10**18:
        digits = str(abs(x))
        return f"{'-' if x < 0 else ''}{digits[:6]}... ({len(digits)} digits)"
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e18 else f"{x:g}"


def _range(key: str, value: float, rule: Rule) -> None:
    lo, hi = rule.lo, rule.hi
    below = lo is not None and (value <= lo if rule.lo_open else value < lo)
    if below or (hi is not None and value > hi):
        if hi is None:
            rng = f"{'>' if rule.lo_open else '>='} {_fmt(lo or 0)}"
        elif rule.lo_open and lo is not None:
            rng = f"> {_fmt(lo)} and <= {_fmt(hi)}"
        else:
            rng = f"in [{_fmt(lo)}, {_fmt(hi)}]" if lo is not None else f"<= {_fmt(hi)}"
        suffix = f" ({rule.what})" if rule.what else ""
        raise ConfigError(key, f"must be {rng}{suffix}, got {_fmt(value)}")


def _as_int(key: str, value: Any, rule: Rule) -> int:
    if isinstance(value, bool):
        raise ConfigError(key, f"must be an integer, got {_type_name(value)}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d{1,30}\s*", value):
        value = int(value)
    if not isinstance(value, int):
        raise ConfigError(key, f"must be an integer, got {_type_name(value)}")
    _range(key, value, rule)
    return value


def _as_float(key: str, value: Any, rule: Rule) -> float:
    if isinstance(value, bool) or isinstance(value, (Mapping, list, tuple)):
        raise ConfigError(key, f"must be a number, got {_type_name(value)}")
    try:
        f = float(value)
    except OverflowError:  # an integer past any float
        raise ConfigError(key, f"must be a finite number, got {_type_name(value)}") from None
    except (TypeError, ValueError):
        raise ConfigError(key, f"must be a number, got {_type_name(value)}") from None
    if not math.isfinite(f):
        raise ConfigError(key, f"must be a finite number, got {_type_name(value)}")
    _range(key, f, rule)
    return f


def _as_bool(key: str, value: Any, rule: Rule) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(key, f"must be true or false, got {_type_name(value)}")
    return value


def _as_enum(key: str, value: Any, rule: Rule) -> Any:
    if any(value is c or (type(value) is type(c) and value == c) for c in rule.choices):
        return value
    shown = ", ".join("null" if c is None else str(c).lower() if isinstance(c, bool) else str(c)
                      for c in rule.choices)
    raise ConfigError(key, f"must be one of {shown}, got {_type_name(value)}")


def _as_text(key: str, value: Any, rule: Rule) -> str:
    if isinstance(value, (Mapping, list, tuple)) or isinstance(value, bool):
        raise ConfigError(key, f"must be a string, got {_type_name(value)}")
    text = str(value)
    no_control_chars(key, text)
    if len(text) > 4096:
        raise ConfigError(key, f"must be at most 4096 characters, got {len(text)}")
    return text


def _matching(pattern: re.Pattern[str], allowed: str) -> Callable[[str, Any, Rule], str]:
    def check(key: str, value: Any, rule: Rule) -> str:
        text = _as_text(key, value, rule)
        if not pattern.match(text):
            raise ConfigError(key, f"must be {allowed}, got {_type_name(text)}")
        return text
    return check


def _as_host(key: str, value: Any, rule: Rule) -> str:
    text = _as_text(key, value, rule)
    if not is_host(text):
        raise ConfigError(key, f"must be an IP address or a host name (letters, digits, '-' and "
                          f"'.', RFC 1123), got {_type_name(text)}")
    return text


def _as_ssh_host(key: str, value: Any, rule: Rule) -> str:
    text = _as_text(key, value, rule)
    if not (is_host(text) or _ALIAS.match(text)):
        raise ConfigError(key, "must be a host name, an IP address or a ~/.ssh/config alias "
                          f"(letters, digits, '_', '-', '.'), got {_type_name(text)}")
    return text


def _as_gateway(key: str, value: Any, rule: Rule) -> str:
    text = _as_text(key, value, rule)
    for hop in [h.strip() for h in text.split(",")]:
        user, _, rest = hop.rpartition("@")
        host, port = rest, ""
        if rest.count(":") == 1:
            host, port = rest.split(":")
        ok = (not user or _USER.match(user)) and (is_host(host) or _ALIAS.match(host)) \
            and (not port or (port.isdigit() and 0 < int(port) <= MAX_PORT))
        if not ok:
            raise ConfigError(key, "must be [user@]host[:port] hops separated by commas, "
                              f"got {hop!r}")
    return text


def _as_unit(key: str, value: Any, rule: Rule) -> str:
    text = _as_text(key, value, rule)
    full = text if text.endswith(".service") else text + ".service"
    stem = full[:-len(".service")]
    if not stem or len(full) > 255 or not _UNIT.match(stem):
        raise ConfigError(key, "must be a systemd unit name: letters, digits, ':', '_', '.', '\\', "
                          "'-' and one '@', not starting with '-' or '.' (systemd.unit(5)), "
                          f"got {_type_name(text)}")
    return text


def _as_path(key: str, value: Any, rule: Rule) -> str:
    text = _as_text(key, value, rule)
    if not text.strip():
        raise ConfigError(key, "must be a path, got an empty string")
    return text


_PSEUDO_FS = ("/proc/", "/sys/")


def _as_local_path(key: str, value: Any, rule: Rule) -> str:
    """A path the server or the harness opens: never a device, FIFO or socket, nothing in /proc or /sys."""
    import os
    import stat

    text = _as_path(key, value, rule)
    absolute = os.path.abspath(os.path.expanduser(text))
    if (absolute + "/").startswith(_PSEUDO_FS):
        raise ConfigError(key, f"must not point into /proc or /sys, got {_type_name(text)}")
    try:
        mode = os.stat(absolute).st_mode
    except OSError:
        return text  # not here (yet, or on the server's box): its reader says so
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ConfigError(key, f"must be a file or directory, got a special file {_type_name(text)} "
                          "(a device, FIFO or socket)")
    return text


def _as_file(key: str, value: Any, rule: Rule) -> str:
    return input_files.check_file(key, _as_path(key, value, rule), rule.fmt or "text")


def _as_outdir(key: str, value: Any, rule: Rule) -> str:
    return input_files.check_outdir(key, _as_path(key, value, rule))


def _as_subpath(key: str, value: Any, rule: Rule) -> str:
    return input_files.check_subpath(key, _as_path(key, value, rule))


def _as_storage(key: str, value: Any, rule: Rule) -> str:
    """An Optuna storage URL (syntax and where its file would go; sweep/compose/storage_url.py)."""
    text = _as_text(key, value, rule)
    if not text.strip() or any(c.isspace() for c in text):
        raise ConfigError(key, f"must be an Optuna storage URL or journal path without spaces, got {_type_name(text)}")
    storage_url.check_location(storage_url.parse(text, key), key)
    return text


def _as_directions(key: str, value: Any, rule: Rule) -> tuple[str, ...]:
    """maximize | minimize, or a list of them (one per objective)."""
    items = value if isinstance(value, (list, tuple)) else [value]
    if not items:
        raise ConfigError(key, "must be maximize or minimize (or a list of them, one per objective), got []")
    out = []
    for item in items:
        if not isinstance(item, str) or item.lower() not in ("maximize", "minimize"):
            raise ConfigError(key, "must be maximize or minimize (or a list of them, one per objective), "
                              f"got {_type_name(item)}")
        out.append(item.lower())
    return tuple(out)


def _as_abspath(key: str, value: Any, rule: Rule) -> str:
    text = _as_path(key, value, rule)
    if not text.startswith("/") or ".." in text.split("/"):
        raise ConfigError(key, f"must be an absolute path without '..', got {_type_name(text)}")
    return text


def _as_remote_dir(key: str, value: Any, rule: Rule) -> str:
    text = _as_path(key, value, rule)
    if not (text.startswith("/") or text == "~" or text.startswith("~/")):
        raise ConfigError(key, f"must be an absolute path or ~/<dir> on the box, got {_type_name(text)}")
    return text


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")


# MLflow's own tracking stores (mlflow.tracking._tracking_service.utils: its store registry);
# plugins add theirs through the ``mlflow.tracking_store`` entry points.
MLFLOW_SCHEMES = ("http", "https", "file", "sqlite", "postgresql", "mysql", "mssql", "databricks",
                  "databricks-uc", "uc")


def _file_store_allowed(key: str, text: str) -> None:
    """MLflow 3.13+ raises on a file store unless MLFLOW_ALLOW_FILE_STORE is set (mlflow#23634):
    refused here, not after the first trial has run."""
    import os
    from importlib.metadata import PackageNotFoundError, version

    if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").strip().lower() in ("1", "true", "yes"):
        return
    try:
        major, minor = (int(x) for x in re.findall(r"\d+", version("mlflow"))[:2])
    except (PackageNotFoundError, ValueError):
        return
    if (major, minor) >= (3, 13):
        raise ConfigError(key, f"{text!r} is a file store, which MLflow {major}.{minor} refuses: give "
                          "sqlite:///<dir>/mlflow.db (or set MLFLOW_ALLOW_FILE_STORE=true)")


def _tracking_schemes() -> set[str]:
    from importlib.metadata import entry_points

    return {*MLFLOW_SCHEMES, *(e.name for e in entry_points(group="mlflow.tracking_store"))}


def _as_uri(key: str, value: Any, rule: Rule) -> str:
    """An MLflow tracking URI (``http(s)://host[:port]/...``, ``sqlite:///path``, a database URL) or a path."""
    from urllib.parse import urlsplit

    text = _as_text(key, value, rule)
    if any(c.isspace() for c in text):
        raise ConfigError(key, f"must be a URI or path without spaces, got {_type_name(text)}")
    if "://" not in text:
        if re.match(r"^(https?|sqlite|postgres(ql)?|mysql|file):", text, flags=re.I):
            raise ConfigError(key, f"must be scheme://..., got {_type_name(text)}")
        _file_store_allowed(key, text)
        return text
    if text.lower().startswith("file://"):
        _file_store_allowed(key, text)
    scheme = text.partition("://")[0]
    if not _SCHEME.match(scheme):
        raise ConfigError(key, f"must be a URI (scheme://...), got {_type_name(text)}")
    base = scheme.split("+")[0].lower()
    known = _tracking_schemes()
    if base not in known:  # MLflow would fail only at the end of the first trial
        raise ConfigError(key, f"unknown scheme {scheme!r}; MLflow stores: {', '.join(sorted(known))} "
                          "(or a plain directory path)")
    if base in ("http", "https"):
        try:
            parts = urlsplit(text)
            host, _port = parts.hostname, parts.port
        except ValueError as exc:
            raise ConfigError(key, f"not a valid URL ({exc}), got {_type_name(text)}") from None
        if not host or not is_host(host):
            raise ConfigError(key, f"must name a host (http(s)://host[:port]/...), got {_type_name(text)}")
    elif base == "sqlite" and not text.startswith(f"{scheme}:///"):
        raise ConfigError(key, f"an SQLite URI is sqlite:///<path> (three slashes), got {_type_name(text)}")
    elif base in storage_url.DIALECTS or base == "postgres":
        storage_url.parse(text, key)
    return text


def _as_slurm_time(key: str, value: Any, rule: Rule) -> str:
    from sweep.launch import slurm_seconds

    text = _as_text(key, value, rule).strip()
    if slurm_seconds(text) is None:
        raise ConfigError(key, "must be a SLURM time limit: minutes, minutes:seconds, "
                          "hours:minutes:seconds, days-hours, days-hours:minutes or "
                          f"days-hours:minutes:seconds, got {_type_name(value)}")
    return text


# sbatch options launcher=slurm relies on (launchers/slurm.py), each with why; docs/cluster.md lists them.
SBATCH_OWNED: dict[str, str] = {
    "array": "one trial is one job: an array runs the trial once per task into one result.json, and its "
             "tasks' ids (123_4) are not the job id the controller watches",
    "signal": "the time limit's early signal goes to the job's shell (B:USR1 at launcher.signal_s), whose trap "
              "records time_limit: set launcher.signal_s",
    "requeue": "the controller runs a lost config again itself (launcher.max_requeue); a job SLURM requeues "
               "runs its trial twice under one id",
    "no-requeue": "the launcher submits every job --no-requeue already (launcher.max_requeue decides)",
    "export": "the job runs with the controller's environment (sbatch's default, ALL): the project, its "
              "Python and the secrets passed through the environment; NONE or a list drops them",
    "get-user-env": "the job runs with the controller's environment, not a login shell's",
    "output": "the job's log is <job dir>/slurm/slurm-<id>.out, which the controller reads when a job ends "
              "without a result",
    "error": "the job's log (stdout and stderr) is <job dir>/slurm/slurm-<id>.out, read by the controller",
    "open-mode": "the job's log is written as the launcher opens it",
    "chdir": "the job runs in the controller's directory (the command line's relative paths)",
    "wrap": "the job's script is the launcher's (<job dir>/slurm/job.sh)",
    "parsable": "the launcher reads the job id from sbatch itself",
    "wait": "sbatch would block the controller until the job ends; it keeps n_jobs jobs in flight",
    "test-only": "the launcher asks sbatch --test-only itself before the first job",
    "hold": "a held job never starts: the controller would wait for it",
    "job-name": "set launcher.job_name (it names the controller's jobs; a second --job-name would replace it)",
    "nodes": "one trial is one task on one node: the trial starts its server there",
    "ntasks": "one trial is one task on one node: the trial starts its server there",
}
# sbatch's long options (sbatch(1)): getopt accepts an unambiguous prefix of one (--arr=1-3 is
# --array), but an exact name is that option (--gpus is not --gpus-per-node).
SBATCH_OPTIONS = frozenset("""
account acctg-freq array batch bb bbf begin chdir cluster-constraint clusters comment constraint container
container-id contiguous core-spec cores-per-socket cpu-freq cpus-per-gpu cpus-per-task deadline delay-boot
dependency distribution error exclude exclusive export export-file extra extra-node-info get-user-env gid gpu-bind
gpu-freq gpus gpus-per-node gpus-per-socket gpus-per-task gres gres-flags hint hold ignore-pbs input job-name
kill-on-invalid-dep licenses mail-type mail-user mcs-label mem mem-bind mem-per-cpu mem-per-gpu mincpus network nice
no-kill no-requeue nodefile nodelist nodes ntasks ntasks-per-core ntasks-per-gpu ntasks-per-node ntasks-per-socket
open-mode output overcommit oversubscribe parsable partition power prefer priority profile propagate qos quiet
reboot requeue reservation resv-ports signal sockets-per-node spread-job switches test-only thread-spec
threads-per-core time time-min tmp tres-per-task uid usage use-min-nodes verbose version wait wait-all-nodes wckey
wrap""".split())


def _sbatch_option(name: str) -> list[str]:
    """The sbatch options ``--<name>`` means: itself, or every option it is a prefix of."""
    if name in SBATCH_OPTIONS:
        return [name]
    return sorted(o for o in SBATCH_OPTIONS if o.startswith(name))


def _as_sbatch_arg(key: str, value: Any, rule: Rule) -> str:
    text = _as_text(key, value, rule)
    if not _SBATCH_ARG.match(text):
        raise ConfigError(key, "must be one sbatch long option, --name or --name=value without "
                          f"spaces (e.g. --reservation=spec), got {_type_name(text)}")
    if any(c in text for c in "$`;|&<>\\"):
        raise ConfigError(key, "must not contain shell characters ($ ` ; | & < > \\)")
    name = text.split("=", 1)[0][2:]
    for option in _sbatch_option(name):
        shown = f"--{option}" + ("" if option == name else f" (--{name} abbreviates it)")
        if option in SBATCH_OWNED:
            raise ConfigError(key, f"{shown} is not allowed: {SBATCH_OWNED[option]}")
        if option == "time":  # the launcher reads the time limit: launcher.signal_s is judged against it
            raise ConfigError(key, f"{shown}: set launcher.sbatch.time instead (the early signal, "
                              "launcher.signal_s, is judged against the time limit)")
    return text


def _list_of(item: Callable[[str, Any, Rule], Any], what: str,
             scalar_ok: bool = True) -> Callable[[str, Any, Rule], tuple[Any, ...]]:
    def check(key: str, value: Any, rule: Rule) -> tuple[Any, ...]:
        if scalar_ok and not isinstance(value, (list, tuple, Mapping)):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(key, f"must be a list of {what}, got {_type_name(value)}")
        if rule.required and not value:
            raise ConfigError(key, f"must be a non-empty list of {what}")
        if len(value) > 10_000:
            raise ConfigError(key, f"must have at most 10000 items, got {len(value)}")
        return tuple(item(f"{key}[{i}]", v, rule) for i, v in enumerate(value))
    return check


def _as_words(key: str, value: Any, rule: Rule) -> tuple[str, ...]:
    """A list of strings; one string is split on whitespace (``server.extra_args='--a --b'``)."""
    return _list_of(_as_text, "strings")(key, value.split() if isinstance(value, str) else value, rule)


def _as_cell(key: str, value: Any, rule: Rule) -> tuple[int, int]:
    """A [context, concurrency] pair (``workload.cells``)."""
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ConfigError(key, f"must be a [context, concurrency] pair, got {value!r}")
    return (int(_as_int(f"{key}[0]", value[0], rule)), int(_as_int(f"{key}[1]", value[1], rule)))


def _as_per_load(key: str, value: Any, rule: Rule) -> tuple[tuple[int, int, int], ...]:
    """``spec.per_load``: [from, to, budget] bands of batch sizes (in-flight requests), inclusive,
    sorted, not overlapping, the first from 1 (every batch size has a budget: vLLM's rule too), a
    budget in [0, ``rule.hi``] (0: no draft at that load), at least one budget above 0."""
    shape = "a list of [from, to, budget] bands, e.g. [[1,1,8],[2,4,4],[5,256,0]]"
    if not isinstance(value, (list, tuple)) or not value:
        raise ConfigError(key, f"must be {shape}, got {_type_name(value)}")
    if len(value) > 1024:
        raise ConfigError(key, f"must have at most 1024 bands, got {len(value)}")
    bands: list[tuple[int, int, int]] = []
    for i, band in enumerate(value):
        if not isinstance(band, (list, tuple)) or len(band) != 3:
            raise ConfigError(f"{key}[{i}]", f"must be [from, to, budget], got {band!r}")
        lo = _as_int(f"{key}[{i}][0]", band[0], Rule("int", 1, MAX_CONCURRENCY, what="in-flight requests"))
        hi = _as_int(f"{key}[{i}][1]", band[1], Rule("int", 1, MAX_CONCURRENCY, what="in-flight requests"))
        k = _as_int(f"{key}[{i}][2]", band[2], Rule("int", rule.lo or 0, rule.hi, what="draft tokens"))
        if lo > hi:
            raise ConfigError(f"{key}[{i}]", f"from {lo} is above to {hi}")
        if bands and lo <= bands[-1][1]:
            raise ConfigError(f"{key}[{i}]", f"[{lo}, {hi}] must start above the previous band's end "
                              f"{bands[-1][1]} (bands sorted, not overlapping)")
        bands.append((lo, hi, k))
    if bands[0][0] != 1:
        raise ConfigError(key, f"the first band must start at 1 (every batch size needs a budget), got "
                          f"{bands[0][0]}")
    if not any(k > 0 for _, _, k in bands):
        raise ConfigError(key, "every budget is 0: that is spec=none (no draft at any load)")
    return tuple(bands)


def _as_ints(key: str, value: Any, rule: Rule) -> tuple[int, ...]:
    items = _list_of(_as_int, "integers")(key, value, rule)
    if not items:
        raise ConfigError(key, "must be a non-empty list of integers")
    return items


def _as_mapping(key: str, value: Any, rule: Rule) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(key, f"must be a mapping, got {_type_name(value)}")
    return value


def _as_list(key: str, value: Any, rule: Rule) -> Any:
    if not isinstance(value, (list, tuple)):
        raise ConfigError(key, f"must be a list, got {_type_name(value)}")
    return value


def _as_figure(key: str, value: Any, rule: Rule) -> Any:
    """A figure of the simulator's model: a non-negative number, a flag, a word, or a group of them."""
    if isinstance(value, Mapping):
        return {k: _as_figure(f"{key}.{k}", v, rule) for k, v in value.items()}
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)):
        return _as_float(key, value, Rule("float", 0, 1e15))
    return _matching(_NAME, "a number, true/false or a word")(key, value, rule)


# ---------------------------------------------------------------------------- command arguments
# (sweep/compose/arguments.py: every command's arguments, checked by kinds like the config's)


def _mode_of(key: str, value: Any, rule: Rule) -> tuple[str, int]:
    """A path that is there, outside /proc and /sys: (its text, its stat mode)."""
    import os

    text = _as_path(key, value, rule)
    if (os.path.abspath(os.path.expanduser(text)) + "/").startswith(_PSEUDO_FS):
        raise ConfigError(key, f"must not point into /proc or /sys, got {_type_name(text)}")
    try:
        return text, os.stat(os.path.expanduser(text)).st_mode
    except OSError as exc:
        raise ConfigError(key, f"{text}: {exc.strerror or exc}") from None


def _as_indir(key: str, value: Any, rule: Rule) -> str:
    """A directory that is there and is read (a sweep dir, results)."""
    import stat

    text, mode = _mode_of(key, value, rule)
    if not stat.S_ISDIR(mode):
        raise ConfigError(key, f"{text}: not a directory")
    return text


def _as_input(key: str, value: Any, rule: Rule) -> str:
    """A file or a directory that is there and is read (never a device, FIFO or socket)."""
    import stat

    text, mode = _mode_of(key, value, rule)
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise ConfigError(key, f"{text}: a special file (a device, FIFO or socket) is never read")
    return text


def _as_outfile(key: str, value: Any, rule: Rule) -> str:
    """A file written to: not a directory or a special file, in a directory that can be written."""
    import os
    import stat

    text = _as_path(key, value, rule)
    path = os.path.expanduser(text)
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise ConfigError(key, f"{text}: {'a directory' if stat.S_ISDIR(mode) else 'a special file'}, "
                          "not a file to write")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):  # a file's folder is not made for it: a typo in it is said now
        raise ConfigError(key, f"{text}: its folder {folder} does not exist")
    input_files.check_outdir(key, folder)
    return text


def _as_slo_limit(key: str, value: Any, rule: Rule) -> str:
    """``LIMIT=MS`` (``--slo tpot_ms=50``): the limit's value by the rule of ``objective.slo.<LIMIT>``."""
    from sweep.stats.slo import LIMITS

    key = key.split("[")[0]  # --slo, not --slo[0]: the limit names itself
    text = _as_text(key, value, rule)
    name, sep, raw = text.partition("=")
    if not sep or name not in LIMITS:
        raise ConfigError(key, f"LIMIT=MS with LIMIT one of {', '.join(LIMITS)}, got {_type_name(text)}")
    check(f"{key} {name}", raw.strip(), rule_key=f"objective.slo.{name}")
    return text


def _as_csv_ints(key: str, value: Any, rule: Rule) -> tuple[int, ...]:
    """``64,256``: integers in the rule's range, comma-separated."""
    text = _as_text(key, value, rule)
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise ConfigError(key, f"must be integers separated by commas (e.g. 64,256), got {_type_name(text)}")
    return _as_ints(key, items, rule)


def _as_overrides(key: str, value: Any, rule: Rule) -> tuple[str, ...]:
    """Hydra override lines (checked by what runs them, with its base: sweep/compose/arguments.py)."""
    return _list_of(_as_text, "override lines")(key, value, rule)


KINDS: dict[str, Callable[[str, Any, Rule], Any]] = {
    "int": _as_int, "float": _as_float, "bool": _as_bool, "enum": _as_enum, "str": _as_text,
    "name": _matching(_NAME, "a name (letters, digits, '.', '_', '+', '-')"),
    "user": _matching(_USER, "a user name (letters, digits, '_', '.', '-')"),
    "url_path": _matching(_URL_PATH, "a URL path starting with '/'"),
    "cpus": _matching(_CPUS, "auto, nobind or core ranges like 0-3,8 (ranks split by '|')"),
    "url_paths": _list_of(_matching(_URL_PATH, "a URL path starting with '/'"), "URL paths"),
    "host": _as_host, "ssh_host": _as_ssh_host, "gateway": _as_gateway, "unit": _as_unit,
    "path": _as_local_path, "abspath": _as_abspath, "remote_dir": _as_remote_dir, "uri": _as_uri,
    "paths": _list_of(_as_local_path, "paths"), "strs": _as_words,
    "enums": _list_of(_as_enum, "names"),
    "file": _as_file, "outdir": _as_outdir, "subpath": _as_subpath, "storage": _as_storage,
    "directions": _as_directions,
    "ints": _as_ints, "floats": _list_of(_as_float, "numbers", scalar_ok=False),
    "mapping": _as_mapping, "list": _as_list, "figure": _as_figure,
    "slurm_time": _as_slurm_time,
    "gres": _matching(_GRES, "SLURM generic resources, name[:type]:count[,...] (e.g. gpu:8)"),
    "slurm_mem": _matching(_SLURM_MEM, "a SLURM memory size, digits and an optional K/M/G/T"),
    "slurm_constraint": _matching(_CONSTRAINT, "SLURM node features (letters, digits, & | , [ ] ( ) * :)"),
    "sbatch_args": _list_of(_as_sbatch_arg, "sbatch options"),
    "lines": _list_of(_as_text, "lines"),
    "cells": _list_of(_as_cell, "[context, concurrency] pairs", scalar_ok=False),
    "indir": _as_indir, "inputs": _list_of(_as_input, "files or directories"), "outfile": _as_outfile,
    "slo_limits": _list_of(_as_slo_limit, "LIMIT=MS"), "csv_ints": _as_csv_ints, "overrides": _as_overrides,
    "names": _list_of(_matching(_NAME, "a name (letters, digits, '.', '_', '+', '-')"), "names"),
    "per_load": _as_per_load,
}


# ---------------------------------------------------------------------------- API


# An empty string for a path or a URI means "not set" (``launcher.state_dir=``).
_EMPTY_IS_UNSET = ("path", "paths", "uri", "file", "outdir", "storage", "outfile")


def _wildcards() -> list[tuple[str, list[str]]]:
    return [(k, k.split(".")) for k in RULES if "*" in k]


_WILDCARDS = _wildcards()


def rule_key_of(key: str) -> str | None:
    """The key of the table whose rule ``key`` follows: itself, or the pattern it matches
    (``model.draft_paths.dflash`` -> ``model.draft_paths.*``, ``model.install.hf.dtype`` ->
    ``model.install.*.dtype``); None when no rule covers it."""
    if key in RULES:
        return key
    parts = key.split(".")
    for pattern, pparts in _WILDCARDS:
        if len(pparts) == len(parts) and all(p in ("*", k) for p, k in zip(pparts, parts)):
            return pattern
    return None


def rule_for(key: str) -> Rule | None:
    """The rule of ``key`` (``model.draft_paths.dflash`` falls back to ``model.draft_paths.*``)."""
    found = rule_key_of(key)
    return RULES[found] if found is not None else None


def check(key: str, value: Any, *, rule_key: str | None = None) -> Any:
    """``value`` checked and typed by the rule of ``rule_key`` (default ``key``); messages name ``key``.

    A key without a rule is returned unchanged; ``None`` is "not set" (an
    error only for a required key).
    """
    rule = rule_for(rule_key or key)
    if rule is None:
        return value
    return check_rule(key, value, rule)


def check_rule(key: str, value: Any, rule: Rule) -> Any:
    """``value`` checked and typed by ``rule`` itself (a command's argument: sweep/compose/arguments.py)."""
    if value == "" and rule.kind in _EMPTY_IS_UNSET:
        value = None
    if value is None and rule.kind != "enum":
        if rule.required:
            raise ConfigError(key, "is required" + (f" ({rule.what})" if rule.what else ""))
        return None
    return KINDS[rule.kind](key, value, rule)


def get(node: Mapping[str, Any], path: str, name: str, default: Any = None) -> Any:
    """``node[name]`` (the group ``path``) checked by its rule; ``default`` when not set."""
    key = f"{path}.{name}"
    value = node.get(name) if isinstance(node, Mapping) else None
    if value is None and key in RULES and not RULES[key].required and RULES[key].kind != "enum":
        return default
    out = check(key, value)
    return default if out is None else out


def _present(cfg: Mapping[str, Any], key: str) -> Iterator[tuple[str, Any]]:
    """(full key, value) of ``key`` in ``cfg``: one pair, one per child matching each ``*``, or none."""
    def walk(node: Any, parts: list[str], done: list[str]) -> Iterator[tuple[str, Any]]:
        if not parts:
            yield ".".join(done), node
            return
        if not isinstance(node, Mapping):
            return
        part, rest = parts[0], parts[1:]
        if part == "*":
            for k, v in node.items():
                yield from walk(v, rest, [*done, str(k)])
        elif part in node:
            yield from walk(node[part], rest, [*done, part])

    yield from walk(cfg, key.split("."), [])


def check_config(cfg: Mapping[str, Any], *, hydra: bool = False) -> None:
    """Every key of a resolved composed config that has a rule, checked (the first error raises).

    Required keys are checked by the builders that read them (a key of
    launcher=ssh is not missing from launcher=local). ``hydra``: the keys of
    Hydra's own node (``hydra.*``; ``cfg`` holds it) instead of the app's.

    Values judged by themselves go first, then paths, files and stores: a path is often built from
    other keys (``model.paths.gguf`` holds ``model.install.*.version``), and the error should name
    the key the user set, not the path that inherited its fault.
    """
    for first in (True, False):
        for key, rule in RULES.items():
            alone = rule.kind in _VALUE_KINDS and key not in _BUILT_FROM_OTHERS
            if key.startswith("hydra.") != hydra or alone != first:
                continue
            for full, value in _present(cfg, key):
                if value is None and rule.kind != "enum":
                    continue
                check(full, value, rule_key=key)


# Keys whose value the shipped groups build from other keys (the server's executable holds
# server.install.*: a fault there is the key the user set, named first).
_BUILT_FROM_OTHERS = frozenset({"server.executable"})

# Kinds whose check is about the value alone. The others look at this machine (a file that must
# exist, a directory that must be writable, a store that must answer): a recorded config was
# checked where it ran, and its paths need not exist where it is read back.
_VALUE_KINDS = frozenset({"int", "float", "bool", "enum", "str", "name", "user", "url_path", "cpus", "url_paths",
                          "host", "ssh_host", "gateway", "unit", "ints", "floats", "mapping", "list", "figure",
                          "slurm_time", "gres", "slurm_mem", "slurm_constraint", "strs", "lines",
                          "directions", "sbatch_args", "per_load"})


def check_recorded(cfg: Any, *, where: str = "config") -> None:
    """A config as a result file or a landscape recorded it, read back: its groups are mappings,
    every value whose rule looks at the value alone passes that rule. Raises :class:`sweep.io.readback.Invalid` naming
    ``<where>.<key>``; paths are not looked up (they were checked where the trial ran)."""
    from sweep.io.readback import Invalid

    if not isinstance(cfg, Mapping):
        raise Invalid(where, "is not an object")
    for group in ("hardware", "spec", "model", "server", "launcher", "workload", "objective", "mlflow"):
        if cfg.get(group) is not None and not isinstance(cfg[group], Mapping):
            raise Invalid(f"{where}.{group}", "is not an object")
    try:
        for key, rule in RULES.items():
            if key.startswith("hydra.") or rule.kind not in _VALUE_KINDS:
                continue
            for full, value in _present(cfg, key):
                if value is not None or rule.kind == "enum":
                    if isinstance(value, str) and "${" in value:
                        continue  # an unresolved interpolation (a config recorded before resolving)
                    check(full, value, rule_key=key)
    except ConfigError as err:
        raise Invalid(f"{where}.{err.key}", err.message) from None


def markdown() -> str:
    """docs/config-keys.md: the table, generated (a test keeps the committed file in step)."""
    from sweep.compose.known_keys import free_places

    lines = ["# Config keys: types and bounds", "",
             "Generated from the key table `sweep/compose/keys.py` (`RULES`); regenerate with",
             "`python -c 'from sweep.compose.bounds import markdown; print(markdown(), end=\"\")' "
             "> docs/config-keys.md`.", "",
             "Every value is checked before anything starts: a wrong one is one line",
             "`error: <key>: <what is allowed>`, exit status 2. Keys across groups",
             "(`spec.topk` <= `spec.budget`, `hardware.tp` <= `hardware.num_gpus`, contexts +",
             "`max_tokens` <= `model.context_length`) are checked by `sweep/compose/config.py`.",
             "Kinds of paths: `file` is read before anything starts (a regular, non-empty file",
             "holding what its format says), `outdir` is written (it exists and is writable, or",
             "can be made), `subpath` stays inside its directory (`sweep/compose/input_files.py`);",
             "the `hydra.*` rows are Hydra's keys a run depends on (`sweep/compose/hydra_checks.py`).", "",
             "A key that does not exist is refused with the nearest ones (`spec.budgit=4`: \"did you mean",
             "spec.budget?\"), and so is a key added with `+` that nothing reads (no row here, no",
             "interpolation of a template names it: it would change nothing). Keys of your own go",
             "where a mapping is free-form -- no child of it has a row: "
             + ", ".join(f"`{p}`" for p in free_places()) + " --",
             "or into a template that names them (`${spec.myknob}` in a render block of your own);",
             "`hydra.*` is Hydra's (it refuses its unknown keys itself), `optuna.*` what the search",
             "sweeper passes its jobs (`sweep/compose/known_keys.py`).", "",
             "| key | kind | allowed | what |", "|---|---|---|---|"]
    for key, rule in RULES.items():
        if rule.kind in ("int", "float", "ints", "floats", "per_load"):
            allowed = (f"{'> ' if rule.lo_open else ''}{_fmt(rule.lo)} .. {_fmt(rule.hi)}"
                       if rule.lo is not None and rule.hi is not None else "")
        elif rule.kind in ("enum", "enums"):
            allowed = ", ".join("null" if c is None else str(c).lower() if isinstance(c, bool) else str(c)
                                for c in rule.choices)
        else:
            allowed = ""
        kind = rule.kind + (f" ({rule.fmt})" if rule.fmt else "") + (", required" if rule.required else "")
        lines.append(f"| `{key}` | {kind} | {allowed} | {rule.what} |")
    return "\n".join(lines) + "\n"
