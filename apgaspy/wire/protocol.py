"""The scheduler wire protocol in one place: every message, who sends it, when, and the reply.

This is the text protocol of the Java ElasticJobScheduler (Posner et al., "Evaluating
malleable job scheduling with APGAS", and its ElasticJobScheduler v0.2), plus three
apgaspy extensions (``ERROR <reason>`` refusals, ``APGAS-Disabled``, ``APGAS-Rigid``).  Both
ends use this module and nothing else for the text of the protocol:

* the job side: :mod:`communicators.socket` (orders in, notifications out),
  :mod:`communicators.order_cli` (one order by hand), and the timing lines of the runtime
  (:mod:`apgaspy.elastic`) and of GLB's handler (:mod:`glb`), through :func:`timing_message`
  and :func:`glb_phase_time`;
* the scheduler side: :mod:`scheduler.order_transport` and :mod:`scheduler.notifications` (the real
  scheduler), :mod:`communicators.testing` (the stand-ins of tests and benchmarks).

It lives in the leaf package :mod:`apgaspy.wire`, below the runtime, the communicators and
the scheduler alike, so that every one of them takes the protocol's text from here; it is
pure (no sockets, the standard library only), and ``apgaspy`` loads its runtime on first
use, so the scheduler imports it without importing the apgaspy runtime.  :data:`MESSAGES` and :data:`JOB_ENVIRONMENT` are the table;
``python -m apgaspy.wire.protocol`` prints the tables of the reference page
``docs/reference/protocol.md`` from them, ``--write`` puts them into the page.  A job with a
key signs its lines and checks the scheduler's (:mod:`apgaspy.wire.auth`).

Transport: TCP, one message a connection, ASCII lines ending in ``\\n``.  Orders go to
``<job address>:SCHEDULER_PORT`` (the job's address is its first host's), or, for a job
apgaspy's scheduler gives :data:`ORDER_PORT_ENV`, to the port it announced
(``APGAS-Ready;<port>``: jobs that share a first node each listen on a port of their own);
notifications go to ``SCHEDULER_IP:SCHEDULER_PORT`` as ``<message>:<job address>``.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ._exceptions import OrderError

__all__ = [
    "DEFAULT_PORT",
    "DISABLED",
    "ERROR_PREFIX",
    "GLB_PHASES",
    "GLB_TIME_SUFFIX",
    "GROW_TIME",
    "JOB_ENVIRONMENT",
    "LOAD",
    "MAX_LINE_BYTES",
    "MESSAGES",
    "READY",
    "RIGID",
    "SHRINK_LINE_TIMEOUT_S",
    "SHRINK_TIME",
    "UNDEFINED_REPLY",
    "EVOLVING",
    "EVOLVING_RELEASE",
    "EVOLVING_REQUEST",
    "UNDEFINED_EVOLVING_REPLY",
    "EnvVar",
    "EvolvingMessage",
    "LoadReport",
    "Message",
    "NotificationKind",
    "Order",
    "OrderError",
    "classify_notification",
    "evolving_release",
    "evolving_request",
    "format_load",
    "format_notification",
    "format_order",
    "format_reply",
    "is_refusal",
    "ORDER_PORT_ENV",
    "ready_message",
    "ready_port",
    "job_environment",
    "java_classify_notification",
    "parse_evolving",
    "parse_load",
    "parse_notification",
    "parse_order",
    "generated_part",
    "glb_phase_time",
    "reference_markdown",
    "write_reference",
    "refusal",
    "rigid_message",
    "split_timing",
    "timing_message",
]

#: The Java scheduler's constant port, for notifications and for orders.
DEFAULT_PORT = 8081
#: Seconds the Java scheduler waits for each reply line of a shrink.
SHRINK_LINE_TIMEOUT_S = 20.0
#: The variable by which apgaspy's scheduler gives a job an order port of its own (apgaspy):
#: ``0`` binds an ephemeral port, announced as ``APGAS-Ready;<port>``.
ORDER_PORT_ENV = "APGAS_ORDER_PORT"
#: The longest order line a job reads.
MAX_LINE_BYTES = 65536
#: How a reply line that refuses an order begins (apgaspy; host names have no spaces).
ERROR_PREFIX = "ERROR "
#: What the Java scheduler answers a notification it does not know.
UNDEFINED_REPLY = "undefined Message"

#: Notification messages (the part before ``:<job address>``).
READY = "APGAS-Ready"
DISABLED = "APGAS-Disabled"
RIGID = "APGAS-Rigid"
SHRINK_TIME = "shrinkTimeAPGAS"
GROW_TIME = "growTimeAPGAS"
#: A running job's load over the last window: ``APGAS-Load;<duty>;<bytes/s>;<gil>;<rss>``.
LOAD = "APGAS-Load"
#: What stands for a figure the job did not measure in a load line.
NOT_MEASURED = "-"
#: An evolving job's own requests: ``Evolving;Request;1`` and ``Evolving;Release;<host>``.
EVOLVING = "Evolving"
EVOLVING_REQUEST = "Request"
EVOLVING_RELEASE = "Release"
#: What the Java scheduler answers an ``Evolving;...`` line of another type.
UNDEFINED_EVOLVING_REPLY = "Undefined Evolving Message"
#: GLB's malleable handler reports its four phases as ``<phase>TimeGLB;<n>;<ns>``.
GLB_PHASES = ("preShrink", "postShrink", "preGrow", "postGrow")
GLB_TIME_SUFFIX = "TimeGLB"

_HOST = re.compile(r"^[A-Za-z0-9._:\-\[\]]{1,253}$")


# ------------------------------------------------------------------------------ the table

@dataclass(frozen=True)
class Message:
    """One message of the protocol (one row of the reference page).

    Attributes:
        line: the line as sent, ``<...>`` marking the variable parts.
        sender: ``"scheduler"`` (an order) or ``"job"`` (a notification).
        when: when it is sent.
        reply: what the other side answers on the same connection.
        origin: ``"Java"`` (the Java scheduler and APGAS speak it) or ``"apgaspy"``.
    """

    line: str
    sender: str
    when: str
    reply: str
    origin: str = "Java"


#: Every message, orders first.
MESSAGES: tuple[Message, ...] = (
    Message("shrink <n>", "scheduler",
            "the policy takes n hosts from a running malleable job that announced APGAS-Ready",
            "n lines, each a released host name spelled as the job was given it (the Java "
            "scheduler waits 20 s per line; a missing line marks the job not reachable); "
            "apgaspy: or one line `ERROR <reason>` when the job refuses"),
    Message("shrink <n> <host_1> ... <host_n>", "scheduler",
            "a node is drained or removed (`python -m scheduler node drain|remove`): the "
            "scheduler names the hosts it wants back; sent to apgaspy jobs (those with a line "
            "key) only, a Java job gets `shrink <n>`",
            "as `shrink <n>`; an apgaspy job releases exactly the named hosts (its handler's "
            "`pre_release`), an evolving one too, or refuses (`ERROR <reason>`: a host it does "
            "not hold, place 0's); a job that answers other hosts has them freed and is "
            "ordered again", "apgaspy"),
    Message("grow <n> <host_1> ... <host_n> ", "scheduler",
            "the policy gives n free hosts to a running malleable job (note the trailing "
            "space, which the Java scheduler sends)",
            "none: the Java scheduler closes at once; apgaspy's job closes when the grow is "
            "done, or first answers `ERROR <reason>` when it refuses (the hosts go back)"),
    Message(f"{EVOLVING};{EVOLVING_REQUEST};1", "job",
            "an evolving job asks for one more node (always one; at most one request of a "
            "job is pending at the scheduler)",
            "none; later, when a node is free, the order `grow 1 <node>`"),
    Message(f"{EVOLVING};{EVOLVING_RELEASE};<host>", "job",
            "an evolving job gave a node back: sent after its places there have ended, one "
            "line per host, then `shrinkTimeAPGAS;<n>;<nanoseconds>`",
            "none; the scheduler frees the node at once and drops the job's pending request"),
    Message(f"{EVOLVING};<other>", "job",
            "any other evolving type (not sent by apgaspy)",
            f"`{UNDEFINED_EVOLVING_REPLY}`"),
    Message(READY, "job",
            "the program has defined its malleable handler: orders are accepted from now on",
            "none; the scheduler marks the job malleable"),
    Message(f"{READY};<port>", "job",
            f"as `{READY}`, from a job given `{ORDER_PORT_ENV}`: it takes its orders on "
            "`<job address>:<port>`, a port of its own (jobs that share a first node)",
            "none; the scheduler marks the job malleable and sends its orders to that port "
            "(journaled); the Java scheduler reads it as `APGAS-Ready`", "apgaspy"),
    Message(DISABLED, "job",
            "the program has disabled its handler (end of the malleable phase); the Java "
            "APGAS job sends nothing then",
            "none (the Java scheduler answers `undefined Message`)", "apgaspy"),
    Message(f"{RIGID};<reason>", "job",
            "the job could not listen for orders on its address and computes on as a rigid "
            "job (the reason has no `:`)",
            "none (the Java scheduler answers `undefined Message`)", "apgaspy"),
    Message(f"{LOAD};<duty>;<bytes_per_s>;<gil or ->;<rss_bytes or ->", "job",
            "every APGAS_LOAD_INTERVAL seconds (5; 0: never) while the job's communicator "
            "runs: its duty cycle over the last window (seconds its places computed, CPU and "
            "waiting for a CPU, / (wall seconds x cores it holds), 3 decimals, in [0, 1]), "
            "bytes its places sent "
            "each other per second, GLB's GIL share in [0, 1] and the resident memory of its "
            "places in bytes (`-`: not measured); socket communicator only",
            "none; the scheduler keeps the last one as the job's load and measured profile "
            "(a line out of range is refused and counted); the Java scheduler logs it as "
            "undefined (`undefined Message`) and goes on", "apgaspy"),
    Message(f"{SHRINK_TIME};<n>;<nanoseconds>", "job",
            "after each shrink of n hosts: its whole duration", "none; the scheduler logs it"),
    Message(f"{GROW_TIME};<n>;<nanoseconds>", "job",
            "after each grow by n hosts: its whole duration", "none; the scheduler logs it"),
    *(Message(f"{phase}{GLB_TIME_SUFFIX};<n>;<nanoseconds>", "job",
              f"GLB's malleable handler, after its {label} phase of an order of n hosts",
              "none; the scheduler logs it")
      for phase, label in zip(GLB_PHASES, ("pre-shrink", "post-shrink", "pre-grow",
                                           "post-grow"), strict=True)),
)


@dataclass(frozen=True)
class EnvVar:
    """One environment variable the scheduler gives a job."""

    name: str
    meaning: str


#: The job's environment, with the Java scheduler's names.
JOB_ENVIRONMENT: tuple[EnvVar, ...] = (
    EnvVar("NODES", "the number of nodes the job starts on"),
    EnvVar("NODE_FILE", "absolute path of a file with one host a line, the first host first"),
    EnvVar("SCHEDULER_IP", "where notifications go (the scheduler's address)"),
    EnvVar("SCHEDULER_PORT", "the notification port, and the port the job takes orders on"),
    EnvVar("JOBNAME", "the scheduler's numeric job id (not the script's #JOB_NAME)"),
    EnvVar("ELASTIC", "`malleable` for a malleable job under a policy that resizes jobs, "
                      "`evolving` for an evolving job under an evolving policy (the Java "
                      "scheduler: its strategy's and the job's name contain `evolving`), else "
                      "`rigid`; an apgaspy job reads it as `APGAS_ELASTIC`'s default"),
    EnvVar(ORDER_PORT_ENV, "apgaspy's scheduler, to a keyed job where nodes have cores "
                           "(`--cores-per-node`): the port it takes orders on instead of "
                           "`SCHEDULER_PORT`, `0` for an ephemeral one; the job announces it "
                           f"(`{READY};<port>`). Unset: `SCHEDULER_PORT`, as in Java"),
)


def job_environment(*, nodes: int, node_file: str, scheduler_ip: str, port: int,
                    job_id: int, malleable: bool) -> dict[str, str]:
    """The variables of :data:`JOB_ENVIRONMENT` for one job, as strings.

    Args:
        nodes: the number of nodes (≥ 1).
        node_file: the node file's absolute path.
        scheduler_ip: the scheduler's address.
        port: ``SCHEDULER_PORT`` (1-65535).
        job_id: the numeric job id.
        malleable: whether the job may be resized (``ELASTIC=malleable``).
    """
    return {"NODES": str(nodes), "NODE_FILE": node_file, "SCHEDULER_IP": scheduler_ip,
            "SCHEDULER_PORT": str(port), "JOBNAME": str(job_id),
            "ELASTIC": "malleable" if malleable else "rigid"}


# ------------------------------------------------------------------------------ orders

@dataclass(frozen=True)
class Order:
    """One scheduler order.

    Attributes:
        kind: ``"shrink"`` or ``"grow"``.
        n: the number of hosts (≥ 1).
        hosts: for a grow, the ``n`` host names in the order given; for a shrink, empty
            (the job chooses) or the ``n`` hosts the scheduler wants back (apgaspy's named
            shrink, sent when a node is drained: docs/guides/scheduler.md).
    """

    kind: str
    n: int
    hosts: tuple[str, ...] = ()


def _count(text: str, line: str) -> int:
    if not text.isdigit():
        raise OrderError(f"the host count must be a positive integer, got {text!r} in {line!r}")
    n = int(text)
    if n < 1:
        raise OrderError(f"the host count must be at least 1 in {line!r}")
    return n


def _hosts(words: Sequence[str], n: int, text: str, *, distinct: bool = False
           ) -> tuple[str, ...]:
    """The ``n`` host names of an order line (``text``, for the message).

    Raises:
        OrderError: not ``n`` names, a word that is not a host name, or (``distinct``: a
            named shrink) a name twice.
    """
    kind = text.split()[0]
    hosts = tuple(words)
    if len(hosts) != n:
        raise OrderError(f"'{kind} {n}' needs {n} host names, got {len(hosts)} in {text!r}")
    bad = [h for h in hosts if not _HOST.match(h)]
    if bad:
        raise OrderError(f"not a host name: {bad[0]!r}")
    if distinct and len(set(hosts)) != n:
        raise OrderError(f"a host is named twice in {text!r}")
    return hosts


def parse_order(line: str) -> Order:
    """Parse one order line (with or without its trailing newline and spaces).

    Raises:
        OrderError: anything but ``shrink <n>``, ``shrink <n> <n host names>`` or
            ``grow <n> <n host names>``, or text that is not printable ASCII.
    """
    text = line.rstrip("\r\n")
    if not text.isascii() or not text.isprintable():
        raise OrderError(f"an order is printable ASCII, got {text[:80]!r}")
    words = text.split()
    if not words:
        raise OrderError("empty order")
    kind = words[0]
    if kind == "shrink":
        if len(words) < 2:
            raise OrderError(f"expected 'shrink <n>' or 'shrink <n> <host_1> ... <host_n>', "
                             f"got {text!r}")
        n = _count(words[1], text)
        if len(words) == 2:
            return Order("shrink", n)
        return Order("shrink", n, _hosts(words[2:], n, text, distinct=True))
    if kind == "grow":
        if len(words) < 2:
            raise OrderError(f"expected 'grow <n> <host_1> ... <host_n>', got {text!r}")
        n = _count(words[1], text)
        return Order("grow", n, _hosts(words[2:], n, text))
    raise OrderError(f"unknown order {kind!r}: expected 'shrink' or 'grow'")


def format_order(order: Order) -> str:
    """The order as the Java scheduler sends it, with its newline: ``shrink <n>\\n`` or
    ``grow <n> <h_1> ... <h_n> \\n`` (trailing space); a named shrink (apgaspy) is
    ``shrink <n> <h_1> ... <h_n>\\n``."""
    if order.kind == "shrink":
        if order.hosts:
            return f"shrink {order.n} {' '.join(order.hosts)}\n"
        return f"shrink {order.n}\n"
    return f"grow {order.n} {' '.join(order.hosts)} \n"


def format_reply(lines: Iterable[str]) -> str:
    """A reply on an order connection: each line with its newline."""
    return "".join(f"{line}\n" for line in lines)


def refusal(reason: str) -> str:
    """The reply line that refuses an order: ``ERROR <reason>`` (no newline)."""
    return ERROR_PREFIX + reason.replace("\n", " ")


def is_refusal(line: str) -> bool:
    """Whether a reply line refuses the order (``ERROR`` alone or ``ERROR <reason>``)."""
    return line == ERROR_PREFIX.strip() or line.startswith(ERROR_PREFIX)


# ------------------------------------------------------------------------------ notifications

class NotificationKind(enum.Enum):
    """What a notification means to the scheduler (:func:`classify_notification`)."""

    READY = "ready"
    DISABLED = "disabled"
    RIGID = "rigid"
    TIMING = "timing"
    EVOLVING = "evolving"
    LOAD = "load"
    UNDEFINED = "undefined"


def format_notification(message: str, address: str) -> str:
    """A notification line ``<message>:<address>`` with its newline.

    Raises:
        ValueError: ``message`` contains ``:`` or a newline (the scheduler splits on ``:``).
    """
    if ":" in message or "\n" in message:
        raise ValueError(f"a notification message may not contain ':' or a newline: {message!r}")
    return f"{message}:{address}\n"


def parse_notification(line: str) -> tuple[str, str]:
    """Split ``<message>:<job address>`` at its first colon: ``(message, address)``.

    A line without a colon gives ``(line, "")``.  IPv6 addresses keep their colons.
    """
    message, _, address = line.strip().partition(":")
    return message, address


@dataclass(frozen=True)
class EvolvingMessage:
    """A parsed ``Evolving;<type>;<argument>`` message (:func:`parse_evolving`).

    Attributes:
        type: ``"Request"``, ``"Release"`` or another (unknown) type.
        argument: for a request the node count (``"1"``), for a release the host name.
    """

    type: str
    argument: str


def evolving_request(n: int = 1) -> str:
    """``Evolving;Request;<n>``: the job asks for ``n`` nodes (the Java runtime always asks
    for 1, and the Java scheduler serves one node per request).

    Raises:
        ValueError: ``n`` is not a positive int.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"an evolving request asks for at least 1 node, got {n!r}")
    return f"{EVOLVING};{EVOLVING_REQUEST};{n}"


def evolving_release(host: str) -> str:
    """``Evolving;Release;<host>``: the job gave ``host`` back (its places have ended).

    Raises:
        ValueError: ``host`` is not a host name (no spaces, ``:`` or ``;``).
    """
    if not _HOST.match(host) or ":" in host:
        raise ValueError(f"not a host name for an evolving release: {host!r}")
    return f"{EVOLVING};{EVOLVING_RELEASE};{host}"


def parse_evolving(message: str) -> EvolvingMessage | None:
    """The evolving message in a notification's message part, or ``None`` when it is not
    one (it does not start with ``Evolving;``): ``Evolving;Release;node7`` →
    ``EvolvingMessage("Release", "node7")``; a missing argument gives ``""``."""
    if not message.startswith(EVOLVING + ";"):
        return None
    _, _, rest = message.partition(";")
    kind, _, argument = rest.partition(";")
    return EvolvingMessage(kind, argument)


def timing_message(kind: str, n: int, nanoseconds: int) -> str:
    """``<kind>;<n>;<nanoseconds>``: :data:`SHRINK_TIME`, :data:`GROW_TIME` or
    ``<phase>TimeGLB`` (:func:`glb_phase_time`) for an order of ``n`` hosts that took
    ``nanoseconds``."""
    return f"{kind};{n};{nanoseconds}"


def glb_phase_time(phase: str) -> str:
    """The timing kind of one of GLB's handler phases, for :func:`timing_message`:
    ``glb_phase_time("preShrink")`` → ``"preShrinkTimeGLB"``.

    Raises:
        ValueError: ``phase`` is not one of :data:`GLB_PHASES`.
    """
    if phase not in GLB_PHASES:
        raise ValueError(f"not a GLB phase: {phase!r} (one of {', '.join(GLB_PHASES)})")
    return phase + GLB_TIME_SUFFIX


@dataclass(frozen=True)
class LoadReport:
    """The figures of one ``APGAS-Load`` line (:func:`format_load`, :func:`parse_load`).

    Attributes:
        duty: the job's duty cycle over the window, in [0, 1] (3 decimals on the wire).
        bytes_per_s: bytes its places sent each other per second (>= 0).
        gil: GLB's GIL share in [0, 1], or ``None`` (not measured).
        rss_bytes: the resident memory of its places in bytes (>= 0), or ``None``.
    """

    duty: float
    bytes_per_s: float
    gil: float | None = None
    rss_bytes: int | None = None


def _load_problem(report: LoadReport) -> str | None:
    if not 0.0 <= report.duty <= 1.0:
        return f"the duty cycle must be in [0, 1], got {report.duty!r}"
    if not 0.0 <= report.bytes_per_s < float("inf"):
        return f"bytes per second must be finite and >= 0, got {report.bytes_per_s!r}"
    if report.gil is not None and not 0.0 <= report.gil <= 1.0:
        return f"the GIL share must be in [0, 1], got {report.gil!r}"
    if report.rss_bytes is not None and report.rss_bytes < 0:
        return f"the resident memory must be >= 0 bytes, got {report.rss_bytes!r}"
    return None


def format_load(report: LoadReport) -> str:
    """``APGAS-Load;<duty>;<bytes_per_s>;<gil or ->;<rss_bytes or ->`` (no address, no
    newline): duty and GIL share with 3 decimals, bytes per second rounded to a whole
    number: ``APGAS-Load;0.873;1520;0.412;73400320``.

    Raises:
        ValueError: a figure is out of range (as :func:`parse_load` refuses it).
    """
    problem = _load_problem(report)
    if problem is not None:
        raise ValueError(problem)
    gil = NOT_MEASURED if report.gil is None else f"{report.gil:.3f}"
    rss = NOT_MEASURED if report.rss_bytes is None else str(int(report.rss_bytes))
    return f"{LOAD};{report.duty:.3f};{report.bytes_per_s:.0f};{gil};{rss}"


def parse_load(message: str) -> LoadReport:
    """The figures of an ``APGAS-Load`` message (the part before ``:<job address>``).

    Raises:
        ValueError: not four ``;``-separated figures after ``APGAS-Load``, a figure that is
            not a number (``-`` for the GIL share and memory), or one out of range (duty
            or GIL share outside [0, 1], negative or infinite bytes per second, negative
            memory); the message says which.
    """
    fields = message.strip().split(";")
    if fields[0] != LOAD or len(fields) != 5:
        raise ValueError(f"expected '{LOAD};<duty>;<bytes_per_s>;<gil or ->;<rss or ->', "
                         f"got {message[:120]!r}")
    try:
        duty, rate = float(fields[1]), float(fields[2])
        gil = None if fields[3] == NOT_MEASURED else float(fields[3])
        rss = None if fields[4] == NOT_MEASURED else int(fields[4])
    except ValueError:
        raise ValueError(f"a load figure is not a number in {message[:120]!r}") from None
    report = LoadReport(duty, rate, gil, rss)
    problem = _load_problem(report)
    if problem is not None:
        raise ValueError(problem)
    return report


def ready_message(port: int | None = None) -> str:
    """``APGAS-Ready``, or ``APGAS-Ready;<port>`` for a job that takes its orders on a port
    of its own (:data:`ORDER_PORT_ENV`).

    Raises:
        ValueError: ``port`` is not a TCP port (1-65535).
    """
    if port is None:
        return READY
    if isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536:
        raise ValueError(f"not a TCP port: {port!r}")
    return f"{READY};{port}"


def ready_port(message: str) -> int | None:
    """The order port an ``APGAS-Ready;<port>`` message announces, or ``None``: a plain
    ``APGAS-Ready`` (orders go to ``SCHEDULER_PORT``), or a port that is not a number in
    1-65535 (the message says nothing the scheduler can use)."""
    head, _, port = message.strip().partition(";")
    if head != READY or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return int(port)


def rigid_message(reason: str) -> str:
    """``APGAS-Rigid;<reason>``, the reason's colons and newlines made spaces."""
    return f"{RIGID};" + reason.replace(":", " ").replace("\n", " ")


def classify_notification(message: str) -> NotificationKind:
    """What the message of a notification means (apgaspy's scheduler): it contains
    ``APGAS-Ready``, ``APGAS-Rigid``, ``APGAS-Disabled``, or ``Time`` (a timing), in that
    order of precedence, after a message that begins ``Evolving;`` (an evolving job's
    request or release, :func:`parse_evolving`) and one that begins ``APGAS-Load``
    (:func:`parse_load`); anything else is undefined."""
    if message.startswith(EVOLVING + ";"):
        return NotificationKind.EVOLVING
    if message.startswith(LOAD):
        return NotificationKind.LOAD
    if READY in message:
        return NotificationKind.READY
    if RIGID in message:
        return NotificationKind.RIGID
    if DISABLED in message:
        return NotificationKind.DISABLED
    if "Time" in message:
        return NotificationKind.TIMING
    return NotificationKind.UNDEFINED


def java_classify_notification(line: str) -> NotificationKind:
    """How the Java scheduler reads a whole notification line: ``APGAS-Ready`` marks the
    job malleable, a line beginning ``Evolving;`` goes to the evolving strategy, a line
    containing ``Time`` is logged, anything else is undefined (and answered
    :data:`UNDEFINED_REPLY`)."""
    if line.startswith(EVOLVING + ";"):
        return NotificationKind.EVOLVING
    if READY in line:
        return NotificationKind.READY
    if "Time" in line:
        return NotificationKind.TIMING
    return NotificationKind.UNDEFINED


def split_timing(line: str) -> list[str]:
    """The fields of a timing notification, split on ``:`` and ``;`` as the Java scheduler
    does: ``growTimeAPGAS;2;1234:127.0.1.1`` → ``["growTimeAPGAS", "2", "1234",
    "127.0.1.1"]`` (an IPv6 address is split too)."""
    return line.strip().replace(";", ":").split(":")


# ------------------------------------------------------------------------------ reference page

def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return out


#: The markers around the generated part of the reference page.
BEGIN_MARK = "<!-- generated by `python -m apgaspy.wire.protocol --write`: begin -->"
END_MARK = "<!-- generated: end -->"


def reference_markdown() -> str:
    """The generated part of the reference page ``docs/reference/protocol.md`` (between
    :data:`BEGIN_MARK` and :data:`END_MARK`), made from :data:`MESSAGES` and
    :data:`JOB_ENVIRONMENT`; ``python -m apgaspy.wire.protocol`` prints it."""
    orders = [m for m in MESSAGES if m.sender == "scheduler"]
    notes = [m for m in MESSAGES if m.sender == "job"]
    lines = [
        BEGIN_MARK,
        "<!-- Made from the message table in apgaspy/wire/protocol.py; edit the table,",
        "     then run `python -m apgaspy.wire.protocol --write`. -->",
        "",
        "### Orders (scheduler to job)",
        "",
        "Sent to `<job address>:SCHEDULER_PORT`, or to the port the job announced",
        f"(`{READY};<port>`, given `{ORDER_PORT_ENV}`); the reply comes on the same connection.",
        "",
        *_table(("line", "when", "reply", "origin"),
                ((f"`{m.line}`", m.when, m.reply, m.origin) for m in orders)),
        "",
        "A refusal (`ERROR <reason>`) leaves the job as it was; the program runs on. Host",
        "names contain no spaces, so a refusal is never taken for a host name.",
        "",
        "### Notifications (job to scheduler)",
        "",
        "Sent to `SCHEDULER_IP:SCHEDULER_PORT` as one line `<message>:<job address>`, where",
        "the job address is the one the job takes orders on. The scheduler splits timing",
        "lines on `:` and `;`.",
        "",
        *_table(("message", "when", "reply", "origin"),
                ((f"`{m.line}`", m.when, m.reply, m.origin) for m in notes)),
        "",
        "### Evolving jobs",
        "",
        "An evolving job asks for nodes and gives them back by itself",
        "([Evolving jobs](../guides/evolving.md)). The scheduler keeps at most one pending",
        "request per job and serves it, before any queued job, with one free node by an",
        "ordinary `grow 1 <node>` order; a release frees the node at once. The policy never",
        "sends `shrink` to an evolving job; an apgaspy job in evolving mode refuses one",
        "(`ERROR <reason>`) and runs on. Only a node being drained or removed is taken back",
        "from it, by the named `shrink <n> <host...>`, which it carries out.",
        "",
        "### The job's environment",
        "",
        *_table(("variable", "meaning"), ((f"`{v.name}`", v.meaning) for v in JOB_ENVIRONMENT)),
        "",
        "### Timeouts",
        "",
        f"* The Java scheduler waits {SHRINK_LINE_TIMEOUT_S:g} s for each reply line of a "
        "shrink; any failure marks",
        "  the job not reachable (treated as rigid from then on) and frees no node.",
        f"* A job reads order lines of at most {MAX_LINE_BYTES} bytes and drops a connection "
        "that sends no",
        "  complete line within `APGAS_ORDER_TIMEOUT` seconds (answering `ERROR <reason>`).",
        END_MARK,
    ]
    return "\n".join(lines) + "\n"


def generated_part(page: str) -> str:
    """The generated part of a reference page's text, markers included ("" if none)."""
    begin, end = page.find(BEGIN_MARK), page.find(END_MARK)
    if begin < 0 or end < begin:
        return ""
    return page[begin:end + len(END_MARK)] + "\n"


def write_reference(path: str) -> None:
    """Replace the generated part of the reference page at ``path`` by
    :func:`reference_markdown`.

    Raises:
        OSError: the page cannot be read or written.
        ValueError: the page has no generated part (no markers).
    """
    with open(path, encoding="utf-8") as fh:
        page = fh.read()
    old = generated_part(page)
    if not old:
        raise ValueError(f"{path} has no generated part ({BEGIN_MARK} ... {END_MARK})")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(page.replace(old, reference_markdown(), 1))


if __name__ == "__main__":
    import sys

    if sys.argv[1:2] == ["--write"]:
        write_reference(sys.argv[2] if len(sys.argv) > 2 else "docs/reference/protocol.md")
    else:
        print(reference_markdown(), end="")
