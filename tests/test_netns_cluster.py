"""Self-checks of the network-namespace test cluster (``cluster.netns``).

They need root (and skip without it): each host is a network namespace with its own hostname,
``/etc/hosts`` and sshd, and MPICH's Hydra starts ranks on them through the ssh wrapper.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster import netns
from conftest import alive

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent  # the environment the tests run in
MPIEXEC = VENV_BIN / "mpiexec"
PYTHON = VENV_BIN / "python"
HELLO = "from mpi4py import MPI; print(MPI.COMM_WORLD.Get_rank(), MPI.Get_processor_name())"
ALLREDUCE = ("from mpi4py import MPI; c = MPI.COMM_WORLD; "
             "print(c.Get_rank(), MPI.Get_processor_name(), c.allreduce(c.Get_rank() + 1))")


def mpi_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    # Block-buffered stdout: each rank writes its line at once, so Hydra's forwarding of
    # several ranks' output does not interleave pieces of lines.
    env.pop("PYTHONUNBUFFERED", None)
    env.update(extra)
    return env


def wait_no_pids(host: netns.Host, timeout: float = 10.0) -> list[int]:
    """Wait until only the sshd runs on ``host``; return what still runs after ``timeout``."""
    deadline = time.monotonic() + timeout
    while (left := host.pids()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def fresh(prefix: str) -> None:
    """Skip unless a cluster can be made here with ``prefix``; remove a stale one."""
    reason = netns.unavailable()
    if reason:
        pytest.skip(reason)
    try:
        netns.remove_stale(prefix)
    except netns.ClusterBusyError as exc:  # another run uses the prefix right now
        pytest.skip(str(exc))


def namespaces() -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True)
    return [line.split()[0] for line in out.stdout.splitlines() if line.strip()]


@pytest.mark.timeout(60)
def test_hosts_names_and_network(netns_cluster: netns.Cluster) -> None:  # noqa: F811
    cluster = netns_cluster
    assert [h.name for h in cluster.hosts] == ["h1", "h2", "h3"]
    assert cluster.setup_seconds < 5
    for host in cluster.hosts:
        assert host.run(["hostname"], timeout=10).stdout.strip() == host.name
        assert host.pids() == []
    h1 = cluster.host("h1")
    got = h1.run(["getent", "hosts", "h2"], timeout=10)
    assert got.stdout.split() == [cluster.host("h2").address, "h2"]
    routes = h1.run(["ip", "route"], timeout=10, check=True).stdout
    assert "default" not in routes
    assert routes.split()[0] == cluster.subnet
    # Nothing outside the subnet is reachable (the kernel refuses before sending anything).
    probe = ("import socket; s = socket.socket(); s.settimeout(2)\n"
             "print(s.connect_ex(('192.0.2.1', 9)))")
    out = h1.run([sys.executable, "-c", probe], timeout=10, check=True).stdout
    assert int(out) == 101  # ENETUNREACH
    root_addrs = subprocess.run(["ip", "-o", "addr"], capture_output=True, text=True).stdout
    assert cluster.subnet.rsplit(".", 1)[0] + "." not in root_addrs
    # cwd is honoured inside the host, although nsenter enters another mount namespace.
    assert h1.run(["pwd"], timeout=10, cwd=ROOT).stdout.strip() == str(ROOT)


@pytest.mark.timeout(60)
def test_run_timeout_kills_the_tree(netns_cluster: netns.Cluster) -> None:  # noqa: F811
    h2 = netns_cluster.host("h2")
    with pytest.raises(subprocess.TimeoutExpired):
        h2.run(["sh", "-c", "sleep 300 & sleep 300"], timeout=0.5)
    assert wait_no_pids(h2) == []


@pytest.mark.timeout(60)
def test_ssh_wrapper_between_hosts(netns_cluster: netns.Cluster) -> None:  # noqa: F811
    cluster = netns_cluster
    h1 = cluster.host("h1")
    got = h1.run([cluster.ssh, "-x", "h2", "hostname"], timeout=20)
    assert got.returncode == 0, got.stderr
    assert got.stdout.strip() == "h2"
    got = h1.run([cluster.ssh, "-x", "h3", "getent", "hosts", "h1"], timeout=20)
    assert got.stdout.split() == [h1.address, "h1"]
    assert not Path("/root/.ssh/known_hosts").exists()
    for host in cluster.hosts:
        assert wait_no_pids(host) == []


@pytest.mark.timeout(120)
@pytest.mark.parametrize("tls", ["default", "tcp"])
def test_mpiexec_over_ssh(netns_cluster: netns.Cluster, tls: str) -> None:  # noqa: F811
    cluster = netns_cluster
    extra = dict(netns.MPI_NETWORK_ENV) if tls == "tcp" else {}
    cmd = [str(MPIEXEC), "-launcher-exec", cluster.ssh, "-hosts", "h1,h2,h3", "-n", "3",
           str(PYTHON), "-c", HELLO]
    got = cluster.host("h1").run(cmd, timeout=90, cwd=ROOT, env=mpi_env(**extra))
    assert got.returncode == 0, got.stderr
    ranks = {tuple(line.split()) for line in got.stdout.splitlines() if line.strip()}
    assert ranks == {("0", "h1"), ("1", "h2"), ("2", "h3")}, got.stdout
    for host in cluster.hosts:
        assert wait_no_pids(host) == [], f"{host.name} keeps processes"


@pytest.mark.timeout(120)
def test_mpi_traffic_crosses_the_bridge(netns_cluster: netns.Cluster) -> None:  # noqa: F811
    """With ``MPI_NETWORK_ENV`` UCX connects the ranks over tcp on eth0, not shared memory."""
    cluster = netns_cluster
    cmd = [str(MPIEXEC), "-launcher-exec", cluster.ssh, "-hosts", "h1,h2,h3", "-n", "3",
           str(PYTHON), "-c", ALLREDUCE]
    env = mpi_env(**netns.MPI_NETWORK_ENV, UCX_LOG_LEVEL="info")
    got = cluster.host("h1").run(cmd, timeout=90, cwd=ROOT, env=env)
    assert got.returncode == 0, got.stderr
    # UCX logs to stdout too, each line starting with "[<time>]".
    lines = {tuple(line.split()) for line in got.stdout.splitlines()
             if line.strip() and not line.startswith("[")}
    assert lines == {("0", "h1", "6"), ("1", "h2", "6"), ("2", "h3", "6")}, got.stdout
    log = got.stdout + got.stderr
    assert "inter-node" in log and "tcp/eth0" in log, log
    assert "intra-node" not in log, log


@pytest.mark.timeout(60)
def test_loopback_self_and_hide(netns_cluster: netns.Cluster,  # noqa: F811
                                netns_cluster_factory) -> None:  # noqa: F811
    special = netns_cluster_factory(loopback_self={"h2"}, hide={"h1": {"h3"}})
    assert special.prefix != netns_cluster.prefix
    h1, h2 = special.host("h1"), special.host("h2")
    first = h2.run(["getent", "hosts", "h2"], timeout=10).stdout.splitlines()[0]
    assert first.split() == ["127.0.1.1", "h2"]  # before the real entry, as on Debian
    assert h1.run(["getent", "hosts", "h2"], timeout=10).stdout.split() == [h2.address, "h2"]
    assert h1.run(["getent", "hosts", "h3"], timeout=10).returncode == 2
    got = h1.run([special.ssh, "-x", "h2", "hostname"], timeout=20)
    assert got.stdout.strip() == "h2", got.stderr
    # The session cluster still works beside it (same subnet, separate bridge).
    got = netns_cluster.host("h1").run([netns_cluster.ssh, "-x", "h2", "hostname"], timeout=20)
    assert got.stdout.strip() == "h2", got.stderr


@pytest.mark.timeout(60)
def test_close_leaves_nothing() -> None:
    fresh("apgzc")
    cluster = netns.start_cluster(2, prefix="apgzc")
    h1, h2 = cluster.hosts
    sshd_pids = [h.sshd_pid for h in cluster.hosts]
    # Leave processes behind: one started on h1, one that h1 starts on h2 through ssh.
    stray = h1.popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    h1.run([cluster.ssh, "-x", "h2", "nohup sleep 300 >/dev/null 2>&1 &"], timeout=20,
           check=True)
    remote = h2.pids()
    assert stray.pid in h1.pids() and remote
    cluster.close()
    stray.wait(timeout=10)
    assert not [ns for ns in namespaces() if ns.startswith("apgzc-")]
    assert not [p for p in [*sshd_pids, *remote] if alive(p)]
    assert not Path(cluster.tmpdir).exists()
    assert not Path("/tmp/apgaspy-netns-apgzc.json").exists()
    assert not list(Path("/etc/netns").glob("apgzc-*"))
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert "apgzc-" not in links
    cluster.close()  # idempotent


@pytest.mark.timeout(60)
def test_cli_up_then_remove_stale() -> None:
    """``up`` leaves a cluster behind as a killed run would; ``remove_stale`` removes it."""
    fresh("apgzs")
    script = Path(netns.__file__)
    up = subprocess.run([sys.executable, str(script), "up", "-n", "2", "--prefix", "apgzs"],
                        capture_output=True, text=True, timeout=30)
    try:
        assert up.returncode == 0, up.stderr
        assert "ssh wrapper:" in up.stdout and "h2 " in up.stdout
        state = json.loads(Path("/tmp/apgaspy-netns-apgzs.json").read_text())
        assert state["owner"] is None
        pids = [h["sshd_pid"] for h in state["hosts"]]
        assert all(alive(p) for p in pids)
        assert {"apgzs-h1", "apgzs-h2", "apgzs-br"} <= set(namespaces())
    finally:
        removed = netns.remove_stale("apgzs")
    assert removed == ["apgzs-br", "apgzs-h1", "apgzs-h2"]
    assert not [ns for ns in namespaces() if ns.startswith("apgzs-")]
    assert not [p for p in pids if alive(p)]
    assert not Path(state["tmpdir"]).exists()
    down = subprocess.run([sys.executable, str(script), "down", "--prefix", "apgzs"],
                          capture_output=True, text=True, timeout=30)
    assert down.returncode == 0 and "nothing" in down.stdout
