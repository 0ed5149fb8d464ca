"""Worker hosts as Linux network namespaces, and a PostgreSQL server only they can reach.

``HostRig`` makes N "hosts": each is a network namespace ``hailq-h<pid>-<rig>-<i>`` with one
end of a veth pair inside (``eth0``, address ``10.77.<k>.<4i+2>/30``) and the other end
in the root namespace (``hqh<pid><rig letter><i>``, ``10.77.<k>.<4i+1>/30``), ``k`` the
first block no other rig uses. A host reaches
nothing but the root-namespace end of its own pair: no forwarding, no default
route, so its only peer is the throwaway PostgreSQL server (``NetServer``), which
listens on those host-side addresses (and on 127.0.0.1 for the test itself) with
trust for the rig's /24 in its ``pg_hba.conf``. The server is pinned to one core
with ``taskset`` (every backend inherits the postmaster's affinity), so a curve
measures the architecture, not two cores shared by the server and every host.

``cut(i)`` sets the host side of host ``i``'s pair down (the namespace's link
loses its carrier: its packets go nowhere), ``restore(i)`` brings it back.

Everything is removed at the end, also when a test fails (the fixtures' finalizers
call ``destroy``). What a killed run left (its pid is gone) is removed by the next:
processes still in its namespaces, the namespaces and links before a new rig is made,
its server before a new server starts. Where namespaces cannot be made (not root, no
``ip``), ``need_namespaces`` skips, except in CI (``CI=true``), where it fails.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import hailq
from needs import unavailable

from .ledger import EffectStore, Ledger, Report, check_queue
from .pgserver import PG_BIN, as_postgres, free_port
from .workers import send_numbered, unfinished

NS_PREFIX = "hailq-h"
SERVER_PREFIX = "hailq-hosts-pg-"
LINK_PREFIX = "hqh"
NETWORK = "10.77"  # each rig takes the first free 10.77.<k>.0/24
_NAME = re.compile(rf"^{NS_PREFIX}(\d+)-\d+-\d+$")
_LINK = re.compile(rf"^{LINK_PREFIX}(\d+)[a-z]\d+$")
_rigs = itertools.count()

HERE = Path(__file__).resolve().parent
SRC = HERE.parent.parent / "src"


def namespaces_problem() -> str | None:
    """Why network namespaces cannot be made here, or None."""
    if sys.platform != "linux":
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    if shutil.which("ip") is None:
        return "no 'ip' command (iproute2)"
    if shutil.which("taskset") is None:
        return "no 'taskset' command (util-linux)"
    if not (PG_BIN / "initdb").exists():
        return f"no PostgreSQL binaries in {PG_BIN} (set HAILQ_PG_BIN)"
    if shutil.which("runuser") is None:
        return "running as root without runuser to become the postgres user"
    probe = f"{NS_PREFIX}probe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode:
        return f"'ip netns add' failed: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def need_namespaces() -> None:
    """Skip (fail in CI) with the reason when namespaces cannot be made."""
    problem = namespaces_problem()
    if problem is None:
        return
    unavailable(problem, "the worker-host tests")


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check,
                          timeout=30)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _kill_inside(namespace: str) -> None:
    """SIGKILL every process in ``namespace`` (workers a killed run left behind)."""
    for pid in _ip("netns", "pids", namespace, check=False).stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGKILL)


def clean_stale() -> list[str]:
    """Remove namespaces and host-side links of rigs whose process is gone; their names."""
    removed = []
    for line in _ip("netns", "list", check=False).stdout.splitlines():
        name = line.split()[0] if line.split() else ""
        m = _NAME.match(name)
        if m and not _alive(int(m.group(1))):
            _kill_inside(name)
            _ip("netns", "del", name, check=False)
            removed.append(name)
    for line in _ip("-o", "link", "show", check=False).stdout.splitlines():
        parts = line.split(":")
        if len(parts) < 2:
            continue
        link = parts[1].strip().split("@")[0]
        m = _LINK.match(link)
        if m and not _alive(int(m.group(1))):
            _ip("link", "del", link, check=False)
            removed.append(link)
    return removed


def _free_block() -> int:
    """The first ``k`` with no address of ``10.77.<k>.0/24`` in the root namespace, so
    rigs of runs side by side (a test beside the curve script) do not collide."""
    taken = set(re.findall(rf"inet {re.escape(NETWORK)}\.(\d+)\.",
                           _ip("-o", "-4", "addr", "show", check=False).stdout))
    for k in range(256):
        if str(k) not in taken:
            return k
    raise RuntimeError(f"every {NETWORK}.<k>.0/24 is in use")


@dataclass
class Host:
    """One namespace: its name, its address, and the server's address as it sees it."""

    index: int
    namespace: str
    link: str  # the host side of the pair, in the root namespace
    address: str  # inside the namespace
    server_address: str  # the host side: where this host reaches the server

    def run(self, *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "netns", "exec", self.namespace, *args],
                              capture_output=True, text=True, timeout=timeout)

    def command(self, *args: str) -> list[str]:
        """``args`` run inside this host's namespace."""
        return ["ip", "netns", "exec", self.namespace, *args]


class HostRig:
    """N hosts; ``destroy()`` removes them (idempotent)."""

    def __init__(self, count: int) -> None:
        if not 1 <= count <= 60:
            raise ValueError("between 1 and 60 hosts fit in one /24")
        clean_stale()
        pid, rig = os.getpid(), next(_rigs)
        k = _free_block()
        self.subnet = f"{NETWORK}.{k}.0/24"
        self.hosts: list[Host] = []
        try:
            for i in range(count):
                host = Host(index=i, namespace=f"{NS_PREFIX}{pid}-{rig}-{i}",
                            link=f"{LINK_PREFIX}{pid}{chr(97 + rig % 26)}{i}",
                            address=f"{NETWORK}.{k}.{4 * i + 2}",
                            server_address=f"{NETWORK}.{k}.{4 * i + 1}")
                self.hosts.append(host)
                self._make(host)
        except BaseException:
            self.destroy()
            raise

    @staticmethod
    def _make(host: Host) -> None:
        ns = host.namespace
        _ip("netns", "add", ns)
        _ip("link", "add", host.link, "type", "veth", "peer", "name", f"{host.link}p")
        _ip("link", "set", f"{host.link}p", "netns", ns)
        _ip("-n", ns, "link", "set", f"{host.link}p", "name", "eth0")
        _ip("addr", "add", f"{host.server_address}/30", "dev", host.link)
        _ip("-n", ns, "addr", "add", f"{host.address}/30", "dev", "eth0")
        _ip("link", "set", host.link, "up")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", ns, "link", "set", "lo", "up")

    def cut(self, i: int) -> None:
        """Take host ``i`` off the network: its link to the server goes down."""
        _ip("link", "set", self.hosts[i].link, "down")

    def restore(self, i: int) -> None:
        _ip("link", "set", self.hosts[i].link, "up")

    def destroy(self) -> None:
        for host in self.hosts:
            _kill_inside(host.namespace)
            _ip("netns", "del", host.namespace, check=False)  # takes its pair with it
            _ip("link", "del", host.link, check=False)

    @property
    def alive(self) -> list[str]:
        """The rig's namespaces that exist now."""
        listed = {line.split()[0] for line in
                  _ip("netns", "list", check=False).stdout.splitlines() if line.split()}
        return [h.namespace for h in self.hosts if h.namespace in listed]


@dataclass
class NetServer:
    """A throwaway PostgreSQL server on the rig's host-side addresses, pinned to one core."""

    base: Path
    port: int
    addresses: list[str]
    core: int
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.base / "server.log"

    @property
    def data(self) -> Path:
        return self.base / "data"

    def url_for(self, address: str = "127.0.0.1", **options: object) -> str:
        extra = "&".join(f"{k}={v}" for k, v in options.items())
        return f"postgresql://postgres@{address}:{self.port}/hailq" + (f"?{extra}" if extra
                                                                       else "")

    def _ctl(self, *args: str) -> None:
        subprocess.run(["taskset", "-c", str(self.core),
                        *as_postgres([str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-l",
                                       str(self.log), "-w", "-t", "60", *args])],
                       capture_output=True, text=True, timeout=90, check=True)

    def start(self) -> None:
        listen = ",".join(["127.0.0.1", *self.addresses])
        self._ctl("start", "-o", f"-p {self.port} -k {self.data} -c listen_addresses={listen}")

    def psql(self, sql: str, db: str = "hailq") -> list[tuple[object, ...]]:
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{self.port}/{db}",
                             autocommit=True, connect_timeout=5) as conn:
            cur = conn.execute(sql)
            return cur.fetchall() if cur.description else []

    @property
    def pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def cpu_seconds(self) -> float:
        """CPU time of the server so far: the postmaster, its ended children, live ones."""
        tick = os.sysconf("SC_CLK_TCK")
        root = self.pid
        total = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError, IndexError, ValueError):
                # Fields after the command name, which is in parentheses and may hold spaces.
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                pid, ppid = int(entry.name), int(fields[1])
                if pid == root:
                    total += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
                elif ppid == root:
                    total += int(fields[11]) + int(fields[12])
        return total / tick

    def affinity(self) -> set[int]:
        return os.sched_getaffinity(self.pid)

    def destroy(self) -> None:
        with contextlib.suppress(Exception):
            self._ctl("stop", "-m", "immediate")
        with contextlib.suppress(Exception):  # a postmaster that would not stop
            os.kill(self.pid, signal.SIGKILL)
        shutil.rmtree(self.base, ignore_errors=True)


def start_server(rig: HostRig, *, core: int = 0,
                 settings: dict[str, str] | None = None) -> NetServer:
    """initdb in a temporary folder, trust for the rig's subnet, start on the host-side
    addresses of its pairs (and 127.0.0.1), pinned to ``core``."""
    addresses = [h.server_address for h in rig.hosts]
    clean_stale_servers()
    # Not under pytest's tmp dir: that is private to root, and the server runs as postgres.
    base = Path(tempfile.mkdtemp(prefix=SERVER_PREFIX))
    (base / "owner").write_text(str(os.getpid()))
    shutil.chown(base, "postgres", "postgres")
    os.chmod(base, 0o700)
    server = NetServer(base=base, port=free_port(), addresses=addresses, core=core)
    try:
        done = subprocess.run(as_postgres([str(PG_BIN / "initdb"), "-D", str(server.data),
                                            "-U", "postgres", "-A", "trust", "--no-sync",
                                            "-E", "UTF8"]),
                              capture_output=True, text=True, timeout=120)
        if done.returncode:
            raise RuntimeError(f"initdb failed: {done.stderr.strip()}")
        with (server.data / "pg_hba.conf").open("a") as f:
            f.write(f"host all all {rig.subnet} trust\n")
        conf = {"max_connections": "400", "shared_buffers": "128MB", "fsync": "on",
                "synchronous_commit": "on", **(settings or {})}
        with (server.data / "postgresql.conf").open("a") as f:
            for key, value in conf.items():
                f.write(f"{key} = '{value}'\n")
        server.start()
        server.psql("CREATE DATABASE hailq", db="postgres")
    except BaseException:
        server.destroy()
        raise
    return server


def clean_stale_servers() -> list[Path]:
    """Stop and remove the servers of runs whose process is gone (a killed test run)."""
    removed = []
    for base in Path(tempfile.gettempdir()).glob(f"{SERVER_PREFIX}*"):
        with contextlib.suppress(OSError, ValueError):
            if _alive(int((base / "owner").read_text())):
                continue
            stale = NetServer(base=base, port=0, addresses=[], core=0)
            stale.destroy()
            removed.append(base)
    return removed


def worker_env(effects: str) -> dict[str, str]:
    return dict(os.environ, FAULTS_EFFECTS=effects,
                PYTHONPATH=os.pathsep.join([str(HERE), str(SRC),
                                            os.environ.get("PYTHONPATH", "")]))


class HostWorkers:
    """``hailq worker`` processes spread over hosts, each in its host's namespace.

    ``placement`` is one entry per process: the host it runs on. Each reaches the
    server (broker and effects store) at its host's ``server_address``.
    """

    def __init__(self, rig: HostRig, server: NetServer, placement: list[int], *, queue: str,
                 schema: str, effects_schema: str, logs: Path, concurrency: int,
                 url_options: dict[str, object] | None = None, grace: float = 10.0) -> None:
        self.rig = rig
        self.server = server
        self.logs = logs
        self.placement = placement
        self.procs: list[subprocess.Popen[bytes]] = []
        self.log_paths: list[Path] = []
        for n, i in enumerate(placement):
            host = rig.hosts[i]
            url = server.url_for(host.server_address, schema=schema, **(url_options or {}))
            effects = EffectStore(server.url_for(host.server_address), effects_schema).spec()
            log_path = logs / f"host{i}-worker{n}.log"
            self.log_paths.append(log_path)
            self.procs.append(subprocess.Popen(
                host.command(sys.executable, "-m", "hailq.cli.worker",
                             "fault_handlers:effect", "--queue", queue, "--url", url,
                             "--concurrency", str(concurrency), "--grace", str(grace),
                             "--log-level", "INFO", "--no-scheduler"),
                env=worker_env(effects), stdout=subprocess.DEVNULL,
                stderr=log_path.open("wb"), cwd=logs, start_new_session=True))

    def pids_of(self, host: int) -> set[int]:
        """The worker pids on ``host`` (``ip netns exec`` execs the worker in place)."""
        return {p.pid for p, i in zip(self.procs, self.placement, strict=True) if i == host}

    def host_of_pid(self) -> dict[int, int]:
        return {p.pid: i for p, i in zip(self.procs, self.placement, strict=True)}

    def stop(self, timeout: float = 60.0) -> list[int | None]:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        codes: list[int | None] = []
        for proc in self.procs:
            try:
                codes.append(proc.wait(timeout))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
                codes.append(None)
        return codes

    def kill_all(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(10)

    def log_text(self, host: int | None = None) -> str:
        return "\n".join(p.read_text(errors="replace") for p, i in
                         zip(self.log_paths, self.placement, strict=True)
                         if host is None or i == host)

    def count_in_logs(self, needle: str, host: int | None = None) -> int:
        return self.log_text(host).count(needle)

    def log_tail(self, chars: int = 2000) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.read_text(errors='replace')[-chars:]}"
                         for p in self.log_paths if p.exists())


def spread(processes: int, hosts: int) -> list[int]:
    """``processes`` worker processes over ``hosts`` hosts, round robin: the host of each."""
    return [n % hosts for n in range(processes)]


def process_cpu(pids: list[int]) -> float:
    """CPU seconds of these processes so far (ended ones count 0)."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(x) for x in fields[11:15])
    return total / os.sysconf("SC_CLK_TCK")


def machine_ticks() -> tuple[int, int]:
    """``(busy, all)`` clock ticks of every core so far, from ``/proc/stat``."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return sum(fields) - idle, sum(fields)


@dataclass
class HostStorm:
    """What one hailstorm over hosts measured (``hailstorm``)."""

    hosts: int
    processes: int
    concurrency: int
    messages: int
    work: float
    drained: bool = False
    seconds: float = 0.0  # first effect to last effect
    rate: float = 0.0  # effects per second over ``seconds``
    server_cpu: float = 0.0  # the pinned core's busy share while effects were written
    waits: dict[str, int] = field(default_factory=dict)  # pg_stat_activity samples
    locked: dict[str, int] = field(default_factory=dict)  # statements waiting on a lock
    report: Report | None = None
    stats: hailq.QueueStats | None = None
    codes: list[int | None] = field(default_factory=list)
    effects_by_host: dict[int, int] = field(default_factory=dict)
    log_counts: dict[int, dict[str, int]] = field(default_factory=dict)  # host -> REFUSED
    machine_cpu: float = 0.0  # busy share of all cores while effects were written
    worker_cpu: float = 0.0  # cores the worker processes kept busy meanwhile
    rows: list[tuple[str, int, float, int]] = field(default_factory=list)  # id pid at host
    tail: str = ""

    def figures(self) -> dict[str, object]:
        s = self.stats
        return {"hosts": self.hosts, "processes": self.processes,
                "concurrency": self.concurrency, "messages": self.messages,
                "work_ms": round(self.work * 1000), "seconds": round(self.seconds, 2),
                "rate": round(self.rate, 1), "server_cpu": round(self.server_cpu, 2),
                "machine_cpu": round(self.machine_cpu, 2),
                "worker_cpu": round(self.worker_cpu, 2),
                "worker_ms_per_message": round(1000 * self.worker_cpu / self.rate, 3)
                if self.rate else None,
                "server_ms_per_message": round(1000 * self.server_cpu / self.rate, 3)
                if self.rate else None,
                "redelivered": s.redelivered if s else None,
                "late_acks": s.late_acks if s else None,
                **(self.report.summary() if self.report else {})}


# Worker log lines that show an ack or an outcome refused because the message was
# received again elsewhere (hailq.runtime.acks / hailq.runtime.worker / heartbeat).
REFUSED = {"refused_acks": "ack found its lease gone",
           "lost_outcomes": "lease lost before its outcome was recorded",
           "lost_leases": "lease lost while its handler runs",
           "unsent_acks": "could not ack"}

_LOCKED = ("SELECT wait_event || ': ' || left(regexp_replace(query, '\\s+', ' ', 'g'), 70), "
           "count(*) FROM pg_stat_activity WHERE state = 'active' AND wait_event_type = 'Lock' "
           "AND backend_type = 'client backend' GROUP BY 1")
_WAITS = ("SELECT coalesce(wait_event_type, 'CPU') || ':' || coalesce(wait_event, 'running'), "
          "count(*) FROM pg_stat_activity WHERE state = 'active' "
          "AND backend_type = 'client backend' AND pid <> pg_backend_pid() GROUP BY 1")


def hailstorm(rig: HostRig, server: NetServer, logs: Path, *, hosts: int, messages: int,
              processes: int, concurrency: int, work: float, lease: float, name: str,
              timeout: float, url_options: dict[str, object] | None = None,
              during: Callable[[float, HostWorkers], None] | None = None) -> HostStorm:
    """Send ``messages`` numbered messages, run ``processes`` × ``concurrency`` handler slots
    spread over the first ``hosts`` hosts until the queue is drained, stop the workers
    (SIGTERM) and check the ledger. ``during(elapsed, workers)`` is called 4 times a second
    while the storm runs (a test cuts a link there)."""
    import psycopg

    out = HostStorm(hosts=hosts, processes=processes, concurrency=concurrency,
                    messages=messages, work=work)
    effects = EffectStore(server.url_for(), f"{name}_fx")
    effects.create()
    ledger = Ledger()
    logs.mkdir(parents=True, exist_ok=True)
    with hailq.connect(server.url_for(schema=name)) as broker:
        q = broker.queue("hailstorm", lease=lease, max_attempts=20,
                         retry={"base": 0.05, "max": 1.0, "jitter": 0})
        send_numbered(q, ledger, 0, messages, work=work)
        workers = HostWorkers(rig, server, spread(processes, hosts), queue="hailstorm",
                              schema=name, effects_schema=f"{name}_fx", logs=logs,
                              concurrency=concurrency, url_options=url_options)
        cpu: list[tuple[float, float, int, int, float]] = []
        pids = [p.pid for p in workers.procs]
        waits: Counter[str] = Counter()
        locked: Counter[str] = Counter()
        try:
            with psycopg.connect(server.url_for(), autocommit=True) as watch:
                t0 = time.monotonic()
                while time.monotonic() - t0 < timeout:
                    cpu.append((time.time(), server.cpu_seconds(), *machine_ticks(),
                                process_cpu(pids)))
                    for what, n in watch.execute(_WAITS).fetchall():
                        waits[str(what)] += int(n)
                    for what, n in watch.execute(_LOCKED).fetchall():
                        locked[str(what)] += int(n)
                    if unfinished(q) == 0:
                        out.drained = True
                        break
                    if during is not None:
                        during(time.monotonic() - t0, workers)
                    time.sleep(0.25)
            out.codes = workers.stop()
        finally:
            workers.kill_all()
        out.report = check_queue(ledger, effects, q)
        out.stats = q.stats()
    with effects._conn() as conn:
        first, last = conn.execute("SELECT min(at), max(at) FROM effects").fetchone()
        rows = conn.execute("SELECT message_id, pid, at FROM effects").fetchall()
    effects.drop()
    if first is not None and last is not None and last > first:
        out.seconds = float(last) - float(first)
        out.rate = out.report.effects / out.seconds
        inside = [c for c in cpu if first <= c[0] <= last]
        if len(inside) >= 2:
            (t0, s0, b0, a0, w0), (t1, s1, b1, a1, w1) = inside[0], inside[-1]
            out.server_cpu = (s1 - s0) / (t1 - t0)
            out.machine_cpu = (b1 - b0) / max(1, a1 - a0)
            out.worker_cpu = (w1 - w0) / (t1 - t0)
    host_of = workers.host_of_pid()
    for message_id, pid, at in rows:
        host = host_of.get(int(pid), -1)
        out.rows.append((str(message_id), int(pid), float(at), host))
        out.effects_by_host[host] = out.effects_by_host.get(host, 0) + 1
    out.waits = dict(waits.most_common())
    out.locked = dict(locked.most_common(5))
    out.log_counts = {h: {k: workers.count_in_logs(v, h) for k, v in REFUSED.items()}
                      for h in range(hosts)}
    out.tail = workers.log_tail()
    return out
