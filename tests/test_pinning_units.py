"""Pinning without a computation: cpulists, APGAS_CORES, the cores' assignment, and the
binding of one real process and of its threads (docs/guides/pinning.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from apgaspy import ConfigurationError, StartupError
from apgaspy import _pinning as pinning
from apgaspy._config import setting
from apgaspy.wire.cores import format_cores_env, format_cpulist, parse_cores_env, parse_cpulist
from apgaspy._report import short_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for key in ("APGAS_CORES", "APGAS_CORES_FILE"):
        monkeypatch.delenv(key, raising=False)


# ---------------------------------------------------------------------- cpulists
def test_pin_parse_cpulist_reads_numbers_ranges_and_strides():
    assert parse_cpulist("0-3,8") == [0, 1, 2, 3, 8]
    assert parse_cpulist(" 4 , 1-2 ") == [4, 1, 2]
    assert parse_cpulist("1,0-1") == [1, 0]  # each CPU once, first occurrence kept
    assert parse_cpulist("0-7:2") == [0, 2, 4, 6]
    assert parse_cpulist("") == []


@pytest.mark.parametrize("text", ["a", "1-", "3-1", "-1", "0-4:0", "1;2"])
def test_pin_parse_cpulist_rejects_bad_items(text):
    with pytest.raises(ValueError, match="cpulist item"):
        parse_cpulist(text)


def test_pin_format_cpulist_is_the_shortest_form_and_round_trips():
    assert format_cpulist([3, 0, 1, 2, 8, 10, 11]) == "0-3,8,10-11"
    assert format_cpulist([5]) == "5"
    assert format_cpulist([1, 1, 2]) == "1-2"
    assert format_cpulist([]) == ""
    for cpus in ([0, 2, 4], [7, 6, 5, 1], list(range(64))):
        assert parse_cpulist(format_cpulist(cpus)) == sorted(cpus)
    with pytest.raises(ValueError):
        format_cpulist([-1])


def test_pin_cores_env_round_trips():
    value = "node1=0-3;127.0.1.1=0-1,4; other = 7 ;"
    cores = parse_cores_env(value)
    assert cores == {"node1": [0, 1, 2, 3], "127.0.1.1": [0, 1, 4], "other": [7]}
    assert format_cores_env(cores) == "node1=0-3;127.0.1.1=0-1,4;other=7"
    assert parse_cores_env(format_cores_env(cores)) == cores
    assert parse_cores_env("") == {}
    assert format_cores_env({"a": [], "b": [1]}) == "b=1"


@pytest.mark.parametrize("text, why", [("node1", "host=cpulist"), ("=0-1", "host=cpulist"),
                                       ("a=1;a=2", "named twice"), ("a=", "no cores"),
                                       ("a=x", "cpulist item")])
def test_pin_cores_env_rejects_bad_entries(text, why):
    with pytest.raises(ValueError, match=why):
        parse_cores_env(text)


def test_pin_format_cores_env_rejects_unwritable_hosts():
    for host in ("", "a=b", "a;b", "a b"):
        with pytest.raises(ValueError, match="cannot be written"):
            format_cores_env({host: [0]})


def test_pin_the_setting_checks_its_value(monkeypatch):
    assert setting("CORES") is None
    monkeypatch.setenv("APGAS_CORES", "h=0-1")
    assert setting("CORES") == "h=0-1"
    monkeypatch.setenv("APGAS_CORES", "h=1-0")
    with pytest.raises(ConfigurationError, match="APGAS_CORES='h=1-0'.*backwards"):
        setting("CORES")


# ---------------------------------------------------------------------- assignment
def test_pin_split_gives_contiguous_chunks_the_first_ones_larger():
    assert pinning.split([0, 1, 2, 3], 2) == [[0, 1], [2, 3]]
    assert pinning.split([0, 1, 2, 3, 4], 2) == [[0, 1, 2], [3, 4]]
    assert pinning.split([4, 5], 3) == [[4], [5], []]
    with pytest.raises(ValueError):
        pinning.split([0], 0)


def test_pin_assign_splits_each_hosts_cores_among_its_places():
    cores = {"a": [0, 1, 2, 3], "b": [8, 9]}
    got = pinning.assign([(0, "a"), (1, "a"), (2, "b"), (3, "b")], cores)
    assert got == {0: ("a", [0, 1]), 1: ("a", [2, 3]), 2: ("b", [8]), 3: ("b", [9])}


def test_pin_assign_skips_cores_held_by_running_places():
    cores = {"a": [0, 1, 2, 3]}
    got = pinning.assign([(5, "a")], cores, held={"a": {0, 1}})
    assert got == {5: ("a", [2, 3])}


def test_pin_assign_matches_hosts_by_resolved_address():
    got = pinning.assign([(0, "127.0.0.1")], {"localhost": [1]})
    assert got == {0: ("localhost", [1])}


def test_pin_a_host_missing_from_the_cores_is_one_line_naming_place_and_host():
    with pytest.raises(ConfigurationError) as info:
        pinning.assign([(0, "a"), (1, "no-such-host.invalid")], {"a": [0]})
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith("place(1) on host no-such-host.invalid: ")
    assert "no cores in APGAS_CORES" in text and "hosts named: a" in text


def test_pin_more_places_than_cores_is_one_line_naming_the_cores():
    with pytest.raises(ConfigurationError) as info:
        pinning.assign([(0, "a"), (1, "a"), (2, "a")], {"a": [0, 1]})
    text = str(info.value)
    assert "\n" not in text and text.startswith("place(2) on host a: no core left")
    assert "the cores 0-1" in text
    with pytest.raises(ConfigurationError, match="0-1 are held by running places"):
        pinning.assign([(4, "a")], {"a": [0, 1]}, held={"a": {0, 1}})


def test_pin_cores_map_merges_the_file_and_reads_it_again(monkeypatch, tmp_path):
    assert pinning.cores_map() is None  # neither set: not pinned
    path = tmp_path / "cores"
    monkeypatch.setenv("APGAS_CORES", "a=0-1;b=2")
    monkeypatch.setenv("APGAS_CORES_FILE", str(path))
    assert pinning.cores_map() == {"a": [0, 1], "b": [2]}  # no file yet: the variable's
    path.write_text("b=3\nc=4-5\n")  # one entry a line
    assert pinning.cores_map() == {"a": [0, 1], "b": [3], "c": [4, 5]}
    path.write_text("c=oops")
    with pytest.raises(ConfigurationError, match="APGAS_CORES_FILE=.*cpulist item"):
        pinning.cores_map()


def test_pin_the_book_frees_the_cores_of_places_gone():
    book = pinning.CoreBook()
    book.note({1: ("a", [0]), 2: ("a", [1]), 3: ("b", [5])})
    assert book.held([1, 2, 3]) == {"a": {0, 1}, "b": {5}}
    assert book.held([1]) == {"a": {0}}  # 2 and 3 released: their cores are free
    book.clear()
    assert book.held([1, 2, 3]) == {}


def test_pin_a_startup_error_prints_one_line():
    text = short_report(StartupError("place(0) on host h: cannot bind to cores 999"))
    assert text is not None and "\n" not in text
    assert text.startswith("StartupError: place(0) on host h: cannot bind to cores 999")


@pytest.mark.skipif(not hasattr(os, "sched_getaffinity"), reason="needs Linux")
def test_pin_usable_cpus_covers_this_process_affinity():
    usable = pinning.usable_cpus()
    assert set(os.sched_getaffinity(0)) <= set(parse_cpulist(usable))


# ---------------------------------------------------------------------- binding
_BIND = textwrap.dedent("""
    import json, os, sys, threading
    from apgaspy import StartupError
    from apgaspy import _pinning as pinning

    def allowed(tid):
        with open(f"/proc/self/task/{tid}/status") as fh:
            return next(l.split(":")[1].strip() for l in fh if l.startswith("Cpus_allowed_list"))

    cores = json.loads(sys.argv[1])
    early = threading.Event(); stop = threading.Event(); tids = {}
    def waiter():  # a thread started before the binding: bound too
        tids["early"] = threading.get_native_id(); early.set(); stop.wait()
    t = threading.Thread(target=waiter); t.start(); early.wait()
    try:
        pinning.bind_place(3, "h", cores)
    except StartupError as exc:
        stop.set(); t.join()
        print(json.dumps({"error": str(exc), "places": exc.places})); sys.exit(0)
    out = {"process": allowed(os.getpid()), "early": allowed(tids["early"]),
           "share": pinning.place_cores()}
    def worker(i):
        with pinning.pinned_worker(i) as core:
            out[f"worker{i}"] = [core, allowed(threading.get_native_id())]
        out[f"after{i}"] = allowed(threading.get_native_id())
    for i in range(3):
        w = threading.Thread(target=worker, args=(i,)); w.start(); w.join()
    stop.set(); t.join()
    print(json.dumps(out))
""")


def _bind(cores: list[int]) -> dict:
    res = subprocess.run([sys.executable, "-c", _BIND, json.dumps(cores)], cwd=ROOT,
                         capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": ROOT})
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
                    reason="needs Linux and two usable cores")
def test_pin_binding_a_process_binds_its_threads_and_workers_take_one_core():
    c0, c1 = sorted(os.sched_getaffinity(0))[:2]
    out = _bind([c0, c1])
    both = format_cpulist([c0, c1])
    assert out["process"] == both and out["early"] == both
    assert out["share"] == [c0, c1]
    assert out["worker0"] == [c0, str(c0)] and out["worker1"] == [c1, str(c1)]
    assert out["worker2"] == [c0, str(c0)]  # i mod len(share)
    assert out["after0"] == both  # the thread gets the whole share back


@pytest.mark.skipif(not hasattr(os, "sched_setaffinity"), reason="needs Linux")
def test_pin_a_refused_binding_names_the_place_host_and_cores():
    out = _bind([999])
    assert out["error"].startswith("place(3) on host h: cannot bind to cores 999 ")
    assert "\n" not in out["error"]
    assert out["places"]["3"][1].startswith("cannot bind to cores 999")
    # a mask the kernel takes in part (a usable core and a missing one) is refused too
    usable = sorted(os.sched_getaffinity(0))[0]
    out = _bind([usable, 999])
    assert "cannot bind to cores" in out["error"] and f"the kernel gave {usable}" in out["error"]


def test_pin_glb_workers_0_means_the_cores_of_the_share(monkeypatch):
    from glb._config import workers_per_place

    monkeypatch.setattr(pinning, "_SHARE", (4, 5, 6))
    assert workers_per_place(0) == 3
    assert workers_per_place(2) == 2
    monkeypatch.setattr(pinning, "_SHARE", None)
    assert workers_per_place(0) == max(1, len(os.sched_getaffinity(0)))
