"""Hosts without processes: address choice, Hydra's launcher, Slurm allocations."""

from __future__ import annotations

import socket

import pytest

from apgaspy import ConfigurationError, MalleabilityError
from apgaspy import _hosts as hosts


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for key in ("APGAS_HOST", "APGAS_INTERFACE", "APGAS_SLURM", "HYDRA_LAUNCHER",
                "HYDRA_LAUNCHER_EXEC", "HYDRA_BOOTSTRAP", "HYDRA_BOOTSTRAP_EXEC", "SLURM_JOB_ID",
                "SLURM_JOBID", "SLURM_JOB_NODELIST", "SLURMD_NODENAME", "SLURM_OVERLAP"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setattr(hosts, "_ALLOCATION", None)
    monkeypatch.setattr(hosts, "_mpiexec_options", lambda: {})


def test_loopback_host_without_remote_peers_keeps_its_address():
    assert hosts.choose_address("127.0.1.3") == "127.0.1.3"
    assert hosts.choose_address("127.0.1.3", toward="127.0.0.1") == "127.0.1.3"


def test_unresolvable_host_on_one_machine_binds_loopback():
    assert hosts.choose_address("no-such-host.invalid") == "127.0.0.1"


def test_interface_and_explicit_host(monkeypatch):
    monkeypatch.setenv("APGAS_INTERFACE", "lo")
    assert hosts.choose_address("127.0.1.3") == "127.0.0.1"
    monkeypatch.setenv("APGAS_INTERFACE", "no-such-nic0")
    with pytest.raises(ConfigurationError, match="no-such-nic0"):
        hosts.choose_address("127.0.1.3")
    monkeypatch.delenv("APGAS_INTERFACE")
    monkeypatch.setenv("APGAS_HOST", "127.0.1.9")  # an address of this machine: used
    assert hosts.choose_address("127.0.1.3") == "127.0.1.9"
    monkeypatch.setenv("APGAS_HOST", "192.0.2.7")  # another machine's (TEST-NET): ignored
    assert hosts.choose_address("127.0.1.3") == "127.0.1.3"


def test_loopback_name_with_remote_peers_takes_the_route_towards_them(monkeypatch):
    monkeypatch.setattr(hosts, "route_source", lambda address: "10.9.8.7")
    assert hosts.choose_address("127.0.1.1", toward="10.9.8.1") == "10.9.8.7"
    assert hosts.choose_address("127.0.1.1", toward=None) == "127.0.1.1"


def test_local_addresses_list_loopback_last():
    found = hosts.local_addresses()
    assert "127.0.0.1" in found
    loops = [hosts.is_loopback(a) for a in found]
    assert loops == sorted(loops)


def test_launcher_from_the_environment(monkeypatch):
    assert hosts.launcher() == hosts.Launcher("ssh", None, "the default")
    monkeypatch.setenv("HYDRA_LAUNCHER_EXEC", "/opt/my-ssh")
    how = hosts.launcher()
    assert (how.kind, how.exec) == ("ssh", "/opt/my-ssh")
    # Hydra runs '<exec> -x <host> <command>'; the check runs the same
    assert how.command("h2", ["python", "-c", "print(1)"]) == \
        ["/opt/my-ssh", "-x", "h2", "python -c 'print(1)'"]
    assert hosts.Launcher("ssh", None, "").command("h2", ["true"]) == \
        ["ssh", "-x", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "h2", "true"]
    monkeypatch.setattr(hosts, "_mpiexec_options",
                        lambda: {"launcher": "rsh", "launcher-exec": "/usr/bin/rsh"})
    assert hosts.launcher() == hosts.Launcher("rsh", "/usr/bin/rsh", "the options of mpiexec")


def test_a_launcher_that_cannot_be_checked_refuses_remote_hosts(monkeypatch):
    monkeypatch.setenv("HYDRA_LAUNCHER", "manual")
    with pytest.raises(MalleabilityError, match="launcher is 'manual'"):
        hosts.check_host("192.0.2.7")
    assert hosts.check_host("127.0.1.5") == "localhost"
    with pytest.raises(MalleabilityError, match="no-such-host.invalid"):
        hosts.check_host("no-such-host.invalid")


def test_a_host_that_just_ran_places_is_not_checked_again_within_the_ttl(monkeypatch):
    """The launcher round trip is skipped for a host noted reachable (a released place ran
    there, or the check passed) for APGAS_CHECK_TTL seconds; a death there, or a TTL of 0,
    brings the check back (here the check itself refuses: a launcher it cannot check)."""
    monkeypatch.setattr(hosts, "_reachable", {})
    monkeypatch.setenv("HYDRA_LAUNCHER", "manual")
    with pytest.raises(MalleabilityError, match="launcher is 'manual'"):
        hosts.check_host("192.0.2.7")
    hosts.note_reachable("192.0.2.7")
    assert hosts.check_host("192.0.2.7") == "192.0.2.7"
    monkeypatch.setenv("APGAS_CHECK_TTL", "0")
    with pytest.raises(MalleabilityError, match="launcher is 'manual'"):
        hosts.check_host("192.0.2.7")
    monkeypatch.setenv("APGAS_CHECK_TTL", "60")
    assert hosts.check_host("192.0.2.7") == "192.0.2.7"
    hosts._reachable["192.0.2.7"] -= 61  # seen 61 s ago
    with pytest.raises(MalleabilityError, match="launcher is 'manual'"):
        hosts.check_host("192.0.2.7")
    hosts.note_reachable("192.0.2.7")
    hosts.forget_reachable("192.0.2.7")
    with pytest.raises(MalleabilityError, match="launcher is 'manual'"):
        hosts.check_host("192.0.2.7")


def test_slurm_allocation(monkeypatch):
    assert hosts.slurm_allocation() is None
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n1,n2,n3")
    alloc = hosts.slurm_allocation()
    assert alloc == hosts.SlurmAllocation("42", "n1", ("n1", "n2", "n3"))
    assert hosts.my_host() == "n1"
    monkeypatch.setenv("SLURMD_NODENAME", "n2")
    assert hosts.slurm_allocation().here == "n2"
    monkeypatch.setenv("APGAS_SLURM", "0")
    assert hosts.slurm_allocation() is None
    assert hosts.my_host() == socket.gethostname()


def test_slurm_grow_needs_overlap_and_a_node_of_the_job(monkeypatch):
    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.setenv("SLURM_JOB_NODELIST", "n1,n2")
    with pytest.raises(MalleabilityError, match="SLURM_OVERLAP=1"):
        hosts.check_host("n2")
    monkeypatch.setenv("SLURM_OVERLAP", "1")
    monkeypatch.setattr(hosts.SlurmAllocation, "current_nodes", lambda self: ["n1", "n2"])
    assert hosts.check_host("n2") == "n2"
    assert hosts.check_host("localhost") == "n1"
    with pytest.raises(MalleabilityError, match="not a node of Slurm job 42, which holds n1,n2"):
        hosts.check_host("n4")
