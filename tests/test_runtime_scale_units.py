"""Unit tests of the runtime-scale benchmark's pure parts: reading processes (this one) and
parsing /proc text (fixed text), process roles, and the figures and goals computed from a
job's data.  No process is started."""

from __future__ import annotations

import os
import socket

import pytest

from benchmarks._procfs import (
    classify,
    descendants,
    fd_info,
    fd_kinds,
    parse_smaps_rss,
    parse_status,
    ppid_map,
    read_cmdline,
    read_stat,
    socket_inodes,
)
from benchmarks.runtime_scale import derive, figures, median_figures


def test_read_stat_of_this_process():
    s = read_stat(os.getpid())
    assert s["pid"] == os.getpid() and s["ppid"] == os.getppid()
    assert s["state"] in "RS" and s["threads"] >= 1 and s["starttime"] > 0
    assert s["utime_s"] + s["stime_s"] > 0 and s["rss_bytes"] > 1_000_000
    assert s["utime_s"] + s["stime_s"] <= sum(os.times()[:2]) + 0.05


def test_ppid_map_and_cmdline_know_this_process_and_its_parent():
    import sys

    procs = ppid_map()
    me = procs[os.getpid()]
    assert me["ppid"] == os.getppid() and me["starttime"] == read_stat(os.getpid())["starttime"]
    assert os.getppid() in procs
    assert read_cmdline(os.getpid()) == sys.orig_argv
    with pytest.raises(ProcessLookupError):
        read_stat(2**22 + 12345)  # above Linux's largest pid


def test_parse_status_of_this_process():
    with open("/proc/self/status") as fh:
        st = parse_status(fh.read())
    assert st["VmRSS"] > 1_000_000 and st["Threads"] >= 1
    assert st["RssAnon"] + st["RssFile"] + st["RssShmem"] == st["VmRSS"]


def test_smaps_rss_adds_up_to_the_resident_set():
    with open("/proc/self/smaps") as fh:
        rss = parse_smaps_rss(fh.read())
    with open("/proc/self/status") as fh:
        vmrss = parse_status(fh.read())["VmRSS"]
    assert abs(sum(rss.values()) - vmrss) < 0.1 * vmrss
    assert any("python" in name or "libpython" in name for name in rss)
    text = ("7f00-7f10 rw-p 00000000 00:00 0 \nRss:                  8 kB\n"
            "7f10-7f20 r-xp 00000000 fe:00 1   /usr/lib/libx.so\nRss:  4 kB\n"
            "VmFlags: rd ex\n7f20-7f30 r--p 00000000 fe:00 1   /usr/lib/libx.so\nRss: 4 kB\n")
    assert parse_smaps_rss(text) == {"[anon]": 8192, "/usr/lib/libx.so": 8192}


def test_descendants_walks_the_tree_from_the_root():
    parents = {1: 0, 10: 1, 11: 10, 12: 10, 13: 12, 20: 1, 30: 99}
    assert descendants(parents, 10) == [10, 11, 12, 13]
    assert descendants(parents, 13) == [13]
    assert 30 not in descendants(parents, 1)


def test_roles_of_the_job_processes():
    child = ["/v/bin/python", "-P", "/v/lib/python3.11/site-packages/apgaspy/_child.py"]
    waiter = ["/v/bin/python", "-I", "-S", "-c", "import os", "apgaspy-anchor", "12"]
    proxy = ["/v/bin/hydra_pmi_proxy", "--control-port", "vm:1"]
    assert classify(["python", "prog.py"], ["bash"], True) == "place0"
    assert classify(child, proxy, False) == "anchor"  # still in its MPI handshake
    assert classify(child, child, False) == "place"
    assert classify(waiter, proxy, False) == "anchor"
    assert classify(child, waiter, False) == "place"
    assert classify(proxy, ["mpiexec", "-pmi_args"], False) == "proxy"
    assert classify(["mpiexec", "-pmi_args", "1"], ["python"], False) == "process_manager"
    assert classify([], ["python"], False) == "other"


def test_socket_tables_and_fd_kinds():
    tcp = ("  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
           "timeout inode\n   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 "
           "00000000     0        0 111 1 0000 100 0 0 10 0\n")
    unix = ("Num       RefCount Protocol Flags    Type St Inode Path\n"
            "0000000023a1768a: 00000003 00000000 00000000 0001 03  222\n"
            "0000000023a1768b: 00000003 00000000 00010000 0001 01  333 /run/x.sock\n")
    inodes = socket_inodes({"tcp": tcp, "unix": unix})
    assert inodes == {111: "tcp", 222: "unix", 333: "unix"}
    kinds = fd_kinds(["socket:[111]", "socket:[222]", "socket:[444]", "pipe:[5]", "pipe:[5]",
                      "anon_inode:[eventfd]", "anon_inode:[eventpoll]",
                      "anon_inode:[timerfd]", "/dev/null", "/tmp/x"], inodes)
    assert kinds == {"tcp": 1, "unix": 1, "socket": 1, "pipe": 2, "eventfd": 1,
                     "eventpoll": 1, "anon": 1, "dev": 1, "file": 1}


def test_fd_info_counts_this_process_descriptors():
    before = fd_info()
    a, b = socket.socketpair()
    r, w = os.pipe()
    try:
        after = fd_info()
    finally:
        for s in (a, b):
            s.close()
        os.close(r)
        os.close(w)
    assert after["pid"] == os.getpid()
    assert after["count"] == before["count"] + 4
    assert after["kinds"].get("unix", 0) == before["kinds"].get("unix", 0) + 2
    assert after["kinds"].get("pipe", 0) == before["kinds"].get("pipe", 0) + 2


def _raw(places: int, ready: float, cpu_each: float, spawned_mb: float) -> dict:
    procs = [{"pid": 1, "role": "place0", "cpu_s": cpu_each, "children_cpu_s": 0.0,
              "threads": 6, "rss_bytes": 40e6, "pss_bytes": 30e6}]
    for i in range(places - 1):
        for role, share in (("anchor", 0.6), ("place", 0.4)):
            procs.append({"pid": 10 + 2 * i + (role == "place"), "role": role,
                          "cpu_s": cpu_each / 2, "children_cpu_s": 0.0, "threads": 2,
                          "rss_bytes": spawned_mb * share * 1e6, "pss_bytes": None})
    fds = {"count": 30 + 5 * places, "kinds": {"tcp": 2 * places}}
    return {"places": places, "ready_s": ready, "finish_s": 0.01, "processes": procs,
            "fds_place0": fds, "fds_place1": {"count": 40, "kinds": {"tcp": 8}}}


def test_figures_per_place_and_per_role():
    f = figures(_raw(4, 2.0, 0.3, 60.0))
    assert f["ready_per_place_s"] == 0.5
    assert f["cpu_total_s"] == pytest.approx(0.3 * 4)
    assert f["cpu_per_place_s"] == pytest.approx(0.3)
    assert f["rss_per_spawned_place_mb"] == pytest.approx(60.0)
    assert f["rss_per_place_mb"] == pytest.approx((40 + 3 * 60) / 4)
    assert f["rss_mb"] == pytest.approx({"place0": 40.0, "anchor": 36.0, "place": 24.0})
    assert f["processes"] == {"place0": 1, "anchor": 3, "place": 3}
    assert f["cpu_s"] == pytest.approx({"place0": 0.3, "anchor": 0.45, "place": 0.45})
    assert (f["fds_place0"], f["tcp_place1"], f["messages_at_startup"]) == (50, 8, None)
    m = median_figures([f, figures(_raw(4, 4.0, 0.3, 60.0)), figures(_raw(4, 3.0, 0.3, 60.0))])
    assert m["ready_s"] == 3.0 and m["rss_mb"]["anchor"] == pytest.approx(36.0)


def test_goals_judged_from_the_figures():
    per_p = {8: figures(_raw(8, 1.6, 0.2, 30.0)), 64: figures(_raw(64, 40.0, 0.22, 30.0))}
    d = derive(per_p)
    assert d["cpu_per_place_growth_8_to_64"]["ratio"] == pytest.approx(1.1)
    assert d["cpu_per_place_growth_8_to_64"]["met"] is True
    assert d["memory_per_spawned_place"]["met"] is True
    assert d["connections_on_demand"]["met"] is True
    r = d["ready_64_vs_linear_from_8"]
    assert r["bound_s"] == pytest.approx(2 * 64 * 0.2) and r["met"] is False
    assert derive({2: figures(_raw(2, 0.5, 0.3, 70.0))})["ready_64_vs_linear_from_8"] == \
        {"met": None}


def test_home_messages_judged_against_the_hosts():
    def with_home(p, messages):
        f = dict(figures(_raw(p, 1.0, 0.2, 30.0)))
        f["finish_home_messages"] = messages
        return f
    per_p = {64: with_home(64, 5), 128: with_home(128, 9)}
    d = derive(per_p, per_host=16)["finish_home_messages"]
    assert d["hosts"] == {"64": 4, "128": 8} and d["met"] is True
    per_p[128] = with_home(128, 127)  # one message a place
    assert derive(per_p, per_host=16)["finish_home_messages"]["met"] is False
