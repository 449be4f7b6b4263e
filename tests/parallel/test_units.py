"""The pool's parts in-process: host overrides, worker command lines, the study lock,
several search loops on one study, and the launcher.hosts checks."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser
from omegaconf import OmegaConf
from optuna.storages.journal import JournalFileBackend, JournalStorage
from optuna.trial import TrialState

from _support import subprocess_env
from hydra_plugins.specsweep_optuna_sweeper import _impl, _pool, _result, _sampler, _space, _storage
from hydra_plugins.specsweep_optuna_sweeper._loop import SearchLoop
from sweep.compose import cmdline as preflight
from sweep.compose.config import from_omegaconf
from sweep.errors import ConfigError, StorageError

optuna.logging.set_verbosity(optuna.logging.WARNING)


# -- hosts and worker command lines ----------------------------------------------------------
def test_host_entries_become_overrides_and_labels() -> None:
    config = OmegaConf.create({"launcher": {"hosts": [
        {"server_port": 31001},
        {"host": "gpu-b", "user": "bob's", "key_filename": ["~/.ssh/a b", "k2"]},
        {"host": "gpu-b", "port": 2222, "label": "gpu-b-alt", "overrides": ["hardware=h200"]},
    ]}})
    hosts = _pool.hosts_of(config, {"hosts_key": "launcher.hosts",
                                    "key_map": {"server_port": "server.port"}})
    assert [h.label for h in hosts] == ["local:31001", "gpu-b", "gpu-b-alt"]
    assert hosts[0].overrides == ["server.port=31001"]
    parsed = {o.key_or_group: o.value()
              for o in OverridesParser.create().parse_overrides(hosts[1].overrides)}
    assert parsed == {"launcher.host": "gpu-b", "launcher.user": "bob's",
                      "launcher.key_filename": ["~/.ssh/a b", "k2"]}
    assert hosts[2].overrides == ["launcher.host='gpu-b'", "launcher.port=2222", "hardware=h200"]
    assert _pool.hosts_of(OmegaConf.create({"launcher": {"hosts": None}}),
                          {"hosts_key": "launcher.hosts"}) == []


@pytest.mark.parametrize("value", ["plain", "it's", "end\\", "a\\'b", "${x}", "a=b,c", "",
                                   "null", "1", 3, 2.5, True, None, ["x y", 1], "tab\there"])
def test_hydra_value_round_trips(value: object) -> None:
    override = OverridesParser.create().parse_override(f"k={_pool.hydra_value(value)}")
    cfg = OmegaConf.create({"k": None})
    OmegaConf.update(cfg, "k", override.value(), merge=True)
    assert OmegaConf.to_container(cfg, resolve=True)["k"] == value


def test_worker_argv_keeps_flags_and_lets_the_host_win() -> None:
    argv = ["-m", "--config-dir", "/extra", "hydra/sweeper=optuna", "server.port=30999",
            "launcher.hosts=[{server_port: 1},{server_port: 2}]", "spec.budget=choice(4,8)",
            "hydra.sweep.dir=relative"]
    extra = ["hydra.sweep.dir='/abs'", "launcher.hosts=null", "server.port=31001",
             "~hydra.callbacks.specsweep"]
    out = _pool.worker_argv(["python", "-m", "sweep"], argv, extra)
    assert out[:6] == ["python", "-m", "sweep", "-m", "--config-dir", "/extra"]
    assert out[6:] == ["hydra/sweeper=optuna", "spec.budget=choice(4,8)", *extra]


def test_base_command_is_how_this_process_started(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "orig_argv", ["python3", "-X", "dev", "-m", "sweep", "-m", "a=1"])
    monkeypatch.setattr(sys, "argv", ["/x/sweep/__main__.py", "-m", "a=1"])
    assert _pool.base_command(None) == [sys.executable, "-X", "dev", "-m", "sweep"]
    assert _pool.base_command(["my", "app"]) == ["my", "app"]


def test_processes_with_token_finds_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    token = "t" + os.urandom(6).hex()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             env={**os.environ, _pool.TOKEN_ENV: token})
    try:
        assert _pool.processes_with_token(token) == [child.pid]
    finally:
        child.kill()
        child.wait()
    assert _pool.processes_with_token(token) == []


# -- the study lock -------------------------------------------------------------------------
def _exclusive(make: "callable[[], _storage.StudyLock]") -> None:  # type: ignore[valid-type]
    a, b = make(), make()
    inside = threading.Event()
    order: list[str] = []

    def other() -> None:
        inside.wait(5)
        with b:
            order.append("b")

    t = threading.Thread(target=other)
    t.start()
    with a:
        with a:  # re-entrant in one thread
            inside.set()
            time.sleep(0.3)
            order.append("a")
    t.join(10)
    assert order == ["a", "b"]
    a.close()
    b.close()


def test_file_lock_is_exclusive_and_reentrant(tmp_path: Path) -> None:
    _exclusive(lambda: _storage.study_lock(f"journal:{tmp_path}/j.log", tmp_path, "s"))
    _exclusive(lambda: _storage.study_lock(f"sqlite:///{tmp_path}/s.db", tmp_path, "s"))


def test_file_lock_leaves_no_file_and_stays_exclusive_across_processes(tmp_path: Path) -> None:
    # A 0-byte study.db.specsweep-lock stayed in the working directory (and in git status).
    db = tmp_path / "study.db"
    lock_file = tmp_path / "study.db.specsweep-lock"
    lock = _storage.study_lock(f"sqlite:///{db}", tmp_path, "s")
    with lock:
        assert lock_file.exists()
        # another process cannot take it while held (flock is per open file, so ask a child)
        probe = ("import sys; from pathlib import Path; from sweep.io.dirlock import try_flock; "
                 "sys.exit(0 if try_flock(Path(sys.argv[1])) is None else 1)")
        assert subprocess.run([sys.executable, "-c", probe, str(lock_file)], env=subprocess_env(),
                              timeout=30).returncode == 0
    assert not lock_file.exists()
    # removed on release, yet still one holder at a time: many threads, each its own open file
    holders: list[int] = []
    overlap: list[int] = []
    guard = threading.Lock()

    def take() -> None:
        for _ in range(30):
            with _storage.study_lock(f"sqlite:///{db}", tmp_path, "s"):
                with guard:
                    holders.append(1)
                    if len(holders) > 1:
                        overlap.append(len(holders))
                time.sleep(0.001)
                with guard:
                    holders.pop()

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert overlap == [] and not lock_file.exists()


def test_sweep_dir_lock_file_is_removed_on_release(tmp_path: Path) -> None:
    from sweep.io import dirlock

    held = dirlock.acquire(tmp_path / "sweep")
    with pytest.raises(StorageError, match="in use by another sweep"):
        dirlock.acquire(tmp_path / "sweep")
    held.release()
    assert not (tmp_path / "sweep" / dirlock.FILENAME).exists()
    dirlock.acquire(tmp_path / "sweep").release()  # free again


def test_postgresql_advisory_lock_is_exclusive(study_db: str, tmp_path: Path) -> None:
    lock = _storage.study_lock(study_db, tmp_path, "s")
    assert "advisory lock" in lock.what
    _exclusive(lambda: _storage.study_lock(study_db, tmp_path, "s"))
    # Another study name is another lock.
    with _storage.study_lock(study_db, tmp_path, "s"):
        with _storage.study_lock(study_db, tmp_path, "other"):
            pass


# -- several loops, one study ------------------------------------------------------------------
SPACE = _space.parse({"x": "choice(" + ", ".join(map(str, range(40))) + ")",
                      "y": "choice(1, 2, 3)"}, [])


def _loop(path: Path, label: str, execute, n_trials: int) -> SearchLoop:  # type: ignore[no-untyped-def]
    storage = JournalStorage(JournalFileBackend(str(path)))
    study = optuna.create_study(study_name="s", storage=storage, load_if_exists=True,
                                direction="maximize")
    study.sampler = _sampler.build({"name": "random"}, seed=hash(label) % 1000, n_objectives=1,
                                   space=SPACE, deterministic=[])
    lock = _storage.study_lock(f"journal:{path}", path.parent, "s")
    return SearchLoop(study, SPACE, execute, n_trials=n_trials, deterministic=[],
                      heartbeat_interval=0.2, lock=lock, stale_after=5.0, label=label)


def _ok(value: float) -> _result.Outcome:
    return _result.Outcome(TrialState.COMPLETE, [value], {"crashed": 0.0}, {"status": "ok"})


def test_four_loops_stop_at_exactly_n_trials_and_take_over_a_dead_trial(tmp_path: Path) -> None:
    path = tmp_path / "study.journal"
    seed_loop = _loop(path, "seed", lambda n, o: _ok(0.0), 12)
    # A trial left RUNNING by a worker that died on this machine.
    dead = seed_loop.study.ask({"x": optuna.distributions.CategoricalDistribution(list(range(40))),
                                "y": optuna.distributions.CategoricalDistribution([1, 2, 3])})
    seed_loop.study._storage.set_trial_system_attr(
        dead._trial_id, _storage.OWNER_KEY, {"host": socket.gethostname(), "pid": 2 ** 22 + 7})
    seed_loop.study._storage.set_trial_system_attr(dead._trial_id, _storage.HEARTBEAT_KEY,
                                                   time.time())
    ran: list[tuple[str, int]] = []
    busy: dict[str, int] = {}
    guard = threading.Lock()

    def make_execute(label: str):  # type: ignore[no-untyped-def]
        def execute(number: int, overrides: list[str]) -> _result.Outcome:
            with guard:
                busy[label] = busy.get(label, 0) + 1
                assert busy[label] == 1, "two trials at once on one host"
                ran.append((label, number))
            time.sleep(random.uniform(0.02, 0.15))
            with guard:
                busy[label] -= 1
            return _ok(float(number))
        return execute

    loops = [_loop(path, f"h{i}", make_execute(f"h{i}"), 12) for i in range(4)]
    errors: list[BaseException] = []

    def run(loop: SearchLoop) -> None:
        try:
            loop.run()
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(lp,)) for lp in loops]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    trials = seed_loop.study.get_trials(deepcopy=False)
    stale = [t for t in trials if t.user_attrs.get("failure_reason") == "stale"]
    assert [t.number for t in stale] == [dead.number]
    counted = [t for t in trials if t.number != dead.number]
    assert len(counted) == 12 and all(t.state == TrialState.COMPLETE for t in counted)
    repeats = [t for t in counted if "duplicate_of" in t.user_attrs]
    assert len(ran) + len(repeats) == 12 and len({n for _, n in ran}) == len(ran)
    assert sum(lp.executed for lp in loops) == len(ran)
    configs = [tuple(sorted(t.params.items())) for t in counted if "duplicate_of" not in t.user_attrs]
    assert len(set(configs)) == len(configs)  # no config ran twice
    assert tuple(sorted(dead.params.items())) in configs  # the dead trial's config ran again
    assert {t.user_attrs["host"] for t in counted} <= {"h0", "h1", "h2", "h3"}


def test_a_config_running_elsewhere_is_awaited_not_run_twice(tmp_path: Path) -> None:
    path = tmp_path / "study.journal"
    release = threading.Event()
    calls: list[int] = []

    def slow(number: int, overrides: list[str]) -> _result.Outcome:
        calls.append(number)
        release.wait(20)
        return _ok(5.0)

    a = _loop(path, "a", slow, 2)
    b = _loop(path, "b", slow, 2)
    a.study.enqueue_trial({"x": 3, "y": 2})
    a.study.enqueue_trial({"x": 3, "y": 2})
    ta = threading.Thread(target=a.run)
    ta.start()
    while not calls:
        time.sleep(0.01)
    tb = threading.Thread(target=b.run)
    tb.start()
    time.sleep(0.5)
    assert calls == [0]  # b waits for trial 0 instead of starting the same server
    release.set()
    ta.join(20)
    tb.join(20)
    trials = a.study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [TrialState.COMPLETE, TrialState.COMPLETE]
    assert trials[1].user_attrs["duplicate_of"] == 0 and calls == [0]


def test_sampler_seeds_per_worker_but_one_grid_order(tmp_path: Path) -> None:
    tpe = _impl.Settings.from_kwargs({"sampler": {"name": "tpe"}, "seed": 7})
    assert _impl.sampler_seed(tpe, 3) == 10
    assert len({_impl.sampler_seed(tpe, 3, f"local:{p}") for p in (1, 2, 3)}) == 3
    grid = _impl.Settings.from_kwargs({"sampler": {"name": "grid"}, "seed": 7})
    assert {_impl.sampler_seed(grid, n, s) for n in (0, 5) for s in (None, "a", "b")} == {7}


# -- launcher.hosts in the app config ---------------------------------------------------------
def build(*overrides: str):  # type: ignore[no-untyped-def]
    return from_omegaconf(preflight.compose(list(overrides)))


def test_valid_pools_compose() -> None:
    cfg = build("launcher.hosts=[{server_port: 31001},{server_port: 31002, label: b}]")
    assert cfg.pool[1].label == "b"
    cfg = build("launcher=ssh", "launcher.hosts=[{host: a},{host: b, user: u, port: 2222}]")
    assert cfg.launcher.ssh is not None and not cfg.launcher.ssh.host


@pytest.mark.parametrize("overrides, key, fragment", [
    (["launcher.hosts=[1, 2]"], "launcher.hosts[0]", "must be a mapping"),
    (["launcher.hosts={a: 1}"], "launcher.hosts", "must be a list"),
    (["launcher.hosts=[{server_port: 1},{sever_port: 2}]"], "launcher.hosts[1].sever_port",
     "not a launcher=local setting"),
    (["launcher.hosts=[{server_port: 31001},{server_port: 31001}]"], "launcher.hosts[1]",
     "own server_port"),
    (["launcher.hosts=[{server_port: 70000}]"], "launcher.hosts[0].server_port", "in [1, 65535]"),
    (["launcher.hosts=[{label: a, server_port: 1},{label: a, server_port: 2}]"],
     "launcher.hosts[1].label", "used by an earlier entry"),
    (["launcher.hosts=[{server_port: 1, overrides: x}]"], "launcher.hosts[0].overrides",
     "list of override strings"),
    (["launcher=ssh", "launcher.hosts=[{host: a},{user: b}]"], "launcher.hosts[1].host",
     "is required"),
    (["launcher=ssh", "launcher.hosts=[{host: a, password: x}]"], "launcher.hosts[0].password",
     "not a launcher=ssh setting"),
    (["launcher=ssh", "launcher.hosts=[{host: a},{host: a}]"], "launcher.hosts[1]",
     "same box"),
    (["launcher=ssh"], "launcher.host", "is required"),
])
def test_bad_pools_are_one_line_errors(overrides: list[str], key: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        build(*overrides)
    assert err.value.key == key and fragment in str(err.value), str(err.value)


def test_a_newline_in_a_host_entry_is_refused() -> None:
    cfg = preflight.compose(["launcher=ssh"])
    OmegaConf.update(cfg, "launcher.hosts", [{"host": "a", "unit": "x.service\nExecStartPre=/bin/sh"}],
                     merge=False)
    with pytest.raises(ConfigError) as err:
        from_omegaconf(cfg)
    assert err.value.key == "launcher.hosts[0].unit" and "newlines" in err.value.message


def test_study_lock_rides_out_a_short_database_outage(monkeypatch: pytest.MonkeyPatch) -> None:
    # held once, then the connection drops twice and comes back: the sweep waits it out
    answers = iter([True, RuntimeError("server closed the connection"), RuntimeError("refused"), True])

    def try_acquire() -> bool:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    monkeypatch.setattr(_storage.time, "sleep", lambda s: None)
    lock = _storage.StudyLock("test", try_acquire, lambda: None)
    with lock:
        pass
    with lock:
        pass
    assert next(answers, "spent") == "spent"  # both failures were retried, not skipped
    # a database that never answered is bad input: refused at once, with its reason
    never = _storage.StudyLock("test", lambda: (_ for _ in ()).throw(RuntimeError("refused")),
                               lambda: None)
    with pytest.raises(StorageError, match="cannot take the study lock: refused"):
        with never:
            pass
    # an outage longer than the retry window ends the wait with the database's own error
    monkeypatch.setattr(_storage, "LOCK_RETRY_S", -1.0)
    stays_down = iter([True])

    def up_then_down() -> bool:
        if next(stays_down, None):
            return True
        raise RuntimeError("down")

    down = _storage.StudyLock("test", up_then_down, lambda: None)
    with down:
        pass
    with pytest.raises(RuntimeError, match="down"):
        with down:
            pass


def test_a_pool_refuses_a_storage_its_workers_cannot_share(tmp_path: Path) -> None:
    from .conftest import run_sweep

    proc = run_sweep(tmp_path, "launcher.hosts=[{server_port: 31001},{server_port: 31002}]",
                     "hydra.sweeper.storage=memory", "workload=smoke", "mlflow.enabled=false",
                     f"hydra.sweep.dir={tmp_path / 'sweep'}", timeout=60)
    assert proc.returncode != 0
    assert "a host pool needs a storage every worker process shares" in proc.stderr
    assert not (tmp_path / "sweep" / "workers").exists()
