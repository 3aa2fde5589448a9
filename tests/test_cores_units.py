"""apgaspy.wire.cores: Linux CPU lists and the ``APGAS_CORES`` variable, both ways."""

from __future__ import annotations

import pytest

from apgaspy.wire.cores import format_cores_env, format_cpulist, parse_cores_env, parse_cpulist


@pytest.mark.parametrize(("text", "cpus"), [
    ("0-1,4", [0, 1, 4]),
    ("3", [3]),
    ("", []),
    ("  ", []),
    ("0-3", [0, 1, 2, 3]),
    ("4,0-1,1", [4, 0, 1]),  # repeated: once each, in the order first given
    (" 2 - 3 , 7 ", [2, 3, 7]),
    ("10-12,64", [10, 11, 12, 64]),
])
def test_parse_cpulist(text, cpus):
    assert parse_cpulist(text) == cpus


@pytest.mark.parametrize("text", ["a", "1-", "-1", "3-1", "0-1:0", "1.5"])
def test_parse_cpulist_refuses_what_is_no_list(text):
    with pytest.raises(ValueError, match="cpulist item"):
        parse_cpulist(text)


@pytest.mark.parametrize(("cpus", "text"), [
    ([0, 1, 4], "0-1,4"),
    ([4, 1, 0, 1], "0-1,4"),
    ([], ""),
    ([7], "7"),
    ([0, 2, 4], "0,2,4"),
    (range(8), "0-7"),
    ([1, 2, 3, 8, 9], "1-3,8-9"),
])
def test_format_cpulist(cpus, text):
    assert format_cpulist(cpus) == text


def test_format_cpulist_refuses_negative_cpus():
    with pytest.raises(ValueError, match="not negative"):
        format_cpulist([-1, 2])


@pytest.mark.parametrize("cpus", [[0], [0, 1, 2, 3], [5, 9, 10, 11, 40], list(range(0, 128, 3))])
def test_cpulists_round_trip(cpus):
    assert parse_cpulist(format_cpulist(cpus)) == cpus


def test_cores_env_both_ways_keeps_host_order():
    cores = {"127.0.1.2": [4, 5], "127.0.1.1": [0, 1, 3]}
    text = format_cores_env(cores)
    assert text == "127.0.1.2=4-5;127.0.1.1=0-1,3"
    parsed = parse_cores_env(text)
    assert parsed == cores and list(parsed) == ["127.0.1.2", "127.0.1.1"]
    assert parse_cores_env("") == {} and format_cores_env({}) == ""
    assert parse_cores_env("a=0;;b=1-2;") == {"a": [0], "b": [1, 2]}
    with pytest.raises(ValueError, match="no cores for host h"):
        parse_cores_env("h=")


@pytest.mark.parametrize(("text", "match"), [
    ("h1", "host=cpulist"),
    ("=0-1", "host=cpulist"),
    ("a=0;a=1", "twice"),
    ("a=x", "cpulist item"),
])
def test_parse_cores_env_refuses(text, match):
    with pytest.raises(ValueError, match=match):
        parse_cores_env(text)


@pytest.mark.parametrize("host", ["", "a=b", "a;b", "a b"])
def test_format_cores_env_refuses_bad_hosts(host):
    with pytest.raises(ValueError, match="host name"):
        format_cores_env({host: [0]})
