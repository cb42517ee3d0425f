"""Start, inspect and stop a standalone Spark master and its workers on 127.0.0.1.

A cluster is a directory::

    cluster.json        the master URL, its port, and one entry per process (role, pid, cores)
    pids/<role>.pid     one file per process (``master``, ``worker-1`` …), written as it starts
    logs/<role>.log     each process's output
    work/<role>/        each worker's scratch space (its executors' working directories)
    spark.properties    what master and workers are started with (no REST server)

``cluster_up`` starts the master, waits until it listens, starts the workers and waits until
the master has registered every one; if anything fails, what it started is stopped again.
``cluster_down`` stops every process by the pid in its pid file (workers first, then the
master; SIGTERM, then SIGKILL after a grace period), after checking that the pid still belongs
to a Spark daemon. Processes are started with ``bin/spark-class``, which ``exec``s the JVM, so
the recorded pid is the daemon's own.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from replica.progress import Progress
from state_manager.durable_files import write_atomically

from .errors import ClusterError
from .spark_home import daemon_environment, spark_class

__all__ = ["ClusterConfig", "ClusterState", "ClusterProcess", "cluster_up", "cluster_status", "cluster_down",
           "load_state", "DEFAULT_DIRECTORY"]

DEFAULT_DIRECTORY = Path(".replica") / "cluster"
STATE_FILE = "cluster.json"
_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
_PROPERTIES = "spark.master.rest.enabled false\n"


@dataclass(frozen=True)
class ClusterConfig:
    directory: Path = DEFAULT_DIRECTORY
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    port: int = 0                 # 0: a free port
    start_timeout_s: float = 90.0


@dataclass(frozen=True)
class ClusterProcess:
    role: str                     # "master", "worker-1", …
    pid: int
    cores: int = 0
    memory: str = ""


@dataclass(frozen=True)
class ClusterState:
    url: str
    port: int
    processes: tuple[ClusterProcess, ...]

    @property
    def workers(self) -> tuple[ClusterProcess, ...]:
        return tuple(p for p in self.processes if p.role != "master")


def _validate(config: ClusterConfig) -> None:
    if config.workers < 1:
        raise ClusterError("a cluster needs at least one worker")
    if config.cores < 1:
        raise ClusterError("a worker needs at least one core")
    if not 0 <= config.port < 65536:
        raise ClusterError(f"port {config.port} is not a TCP port")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def is_spark_daemon(pid: int) -> bool:
    """Is ``pid`` alive and one of Spark's deploy daemons (not a reused pid)?"""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"org.apache.spark.deploy." in cmdline


def load_state(directory: Path) -> ClusterState | None:
    path = Path(directory) / STATE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
        return ClusterState(data["url"], data["port"], tuple(ClusterProcess(**p) for p in data["processes"]))
    except (ValueError, KeyError, TypeError) as exc:
        raise ClusterError(f"{path} is not a cluster state file: {exc}") from exc


def _save_state(directory: Path, state: ClusterState) -> None:
    write_atomically(directory / STATE_FILE, (json.dumps(asdict(state), indent=2) + "\n").encode())


def _start(role: str, arguments: list[str], directory: Path, env: dict[str, str]) -> subprocess.Popen:
    with open(directory / "logs" / f"{role}.log", "ab") as log:
        process = subprocess.Popen([str(spark_class()), *arguments], stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, env=env, cwd=directory, start_new_session=True)
    (directory / "pids" / f"{role}.pid").write_text(f"{process.pid}\n")
    return process


def _wait_for(predicate, what: str, timeout_s: float, started: list[subprocess.Popen], directory: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        # Our own children: poll() is authoritative (a /proc read can race the exec into the JVM).
        if any(process.poll() is not None for process in started):
            raise ClusterError(f"a Spark process exited while waiting for {what}; see {directory / 'logs'}")
        time.sleep(0.3)
    raise ClusterError(f"timed out after {timeout_s:.0f} s waiting for {what}; see {directory / 'logs'}")


def _registered_workers(directory: Path) -> int:
    try:
        return (directory / "logs" / "master.log").read_bytes().count(b"Registering worker")
    except OSError:
        return 0


def cluster_up(config: ClusterConfig = ClusterConfig(), status: Progress | None = None) -> ClusterState:
    """Start a master and ``config.workers`` workers; return the running cluster."""
    _validate(config)
    status = status or Progress(quiet=True)
    directory = Path(config.directory).resolve()
    running = cluster_status(directory)
    if running is not None and any(is_spark_daemon(p.pid) for p in running.processes):
        raise ClusterError(f"a cluster is already running from {directory} at {running.url}: "
                           "`replica cluster down` first")
    for sub in ("pids", "logs", "work"):
        (directory / sub).mkdir(parents=True, exist_ok=True)
    (directory / STATE_FILE).unlink(missing_ok=True)
    properties = directory / "spark.properties"
    properties.write_text(_PROPERTIES)
    env = daemon_environment(os.environ, directory / "logs")
    port = config.port or _free_port()
    url = f"spark://127.0.0.1:{port}"
    (directory / "logs" / "master.log").unlink(missing_ok=True)   # registrations are counted in it
    processes: list[ClusterProcess] = []
    started: list[subprocess.Popen] = []
    try:
        status.update(f"starting the Spark master on 127.0.0.1:{port}")
        started.append(_start("master", [_MASTER_CLASS, "--host", "127.0.0.1", "--port", str(port), "--webui-port",
                                         "0", "--properties-file", str(properties)], directory, env))
        processes.append(ClusterProcess("master", started[-1].pid))
        _wait_for(lambda: _listening(port), "the master to listen", config.start_timeout_s, started, directory)
        for number in range(1, config.workers + 1):
            role = f"worker-{number}"
            work = directory / "work" / role
            work.mkdir(parents=True, exist_ok=True)
            started.append(_start(role, [_WORKER_CLASS, url, "--host", "127.0.0.1", "--cores", str(config.cores),
                                         "--memory", config.memory, "--webui-port", "0", "--work-dir", str(work),
                                         "--properties-file", str(properties)], directory, env))
            processes.append(ClusterProcess(role, started[-1].pid, config.cores, config.memory))
        status.update(f"waiting for {config.workers} worker(s) to register")
        _wait_for(lambda: _registered_workers(directory) >= config.workers, "every worker to register",
                  config.start_timeout_s, started, directory)
    except BaseException:
        _stop_started(directory, processes, started)
        raise
    state = ClusterState(url, port, tuple(processes))
    _save_state(directory, state)
    status.finish(f"Spark master {url}: {config.workers} worker(s) × {config.cores} core(s)")
    return state


def cluster_status(directory: Path = DEFAULT_DIRECTORY) -> ClusterState | None:
    """The cluster recorded in ``directory`` (None: none recorded); use ``alive`` on its processes."""
    return load_state(Path(directory).resolve())


def alive(process: ClusterProcess) -> bool:
    return is_spark_daemon(process.pid)


def _stop(pid: int, grace_s: float) -> None:
    if not is_spark_daemon(pid):
        return
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not is_spark_daemon(pid):
            return
        time.sleep(0.2)
    os.kill(pid, signal.SIGKILL)


def _stop_all(directory: Path, processes: list[ClusterProcess] | tuple[ClusterProcess, ...], grace_s: float = 20.0) -> None:
    # Workers first: a worker that loses its master keeps retrying to reconnect.
    for process in sorted(processes, key=lambda p: p.role == "master"):
        _stop(process.pid, grace_s)
        _reap(process.pid)
        (directory / "pids" / f"{process.role}.pid").unlink(missing_ok=True)


def _stop_started(directory: Path, processes: list[ClusterProcess], started: list[subprocess.Popen],
                  grace_s: float = 20.0) -> None:
    """Stop what a failed ``cluster_up`` started: our own children, so no pid check is needed."""
    for process, popen in sorted(zip(processes, started), key=lambda pair: pair[0].role == "master"):
        if popen.poll() is None:
            popen.terminate()
            try:
                popen.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()
        (directory / "pids" / f"{process.role}.pid").unlink(missing_ok=True)


def _reap(pid: int) -> None:
    """Collect the exit status when the process is our own child (``up`` failing half-way)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def _pid_files(directory: Path) -> list[ClusterProcess]:
    found = []
    for path in sorted((directory / "pids").glob("*.pid")):
        text = path.read_text().strip()
        if text.isdigit():
            found.append(ClusterProcess(path.stem, int(text)))
    return found


def cluster_down(directory: Path = DEFAULT_DIRECTORY, grace_s: float = 20.0) -> list[ClusterProcess]:
    """Stop every process of the cluster in ``directory`` by its own pid; return those stopped."""
    directory = Path(directory).resolve()
    processes = _pid_files(directory) if (directory / "pids").is_dir() else []
    if not processes and load_state(directory) is None:
        raise ClusterError(f"no cluster in {directory}")
    stopped = [p for p in processes if is_spark_daemon(p.pid)]
    _stop_all(directory, processes, grace_s)
    (directory / STATE_FILE).unlink(missing_ok=True)
    return stopped
