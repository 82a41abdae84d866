"""Helpers shared by the benchmark scripts in ``bench/``.

Every benchmark owns one section of ``docs/benchmarks.md``, fenced by HTML
comment markers, and rewrites only that section: several scripts can then
record their figures into one page without clobbering each other, and a rerun
replaces stale numbers instead of appending new ones. A figure is worthless
without the machine it came from and the command that produced it, so every
section carries both.

Stdlib only: a benchmark must run wherever the package's runtime deps do.
"""

from __future__ import annotations

import datetime as _dt
import math
import os
import platform
import re
import shlex
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS_MD = REPO_ROOT / "docs" / "benchmarks.md"

PAGE_HEADER = """# Benchmarks

Figures recorded by the scripts in `bench/`. Each section below is written by
one script, between its `<!-- bench:NAME:start -->` and `<!-- bench:NAME:end -->`
markers; rerun the command shown in a section to refresh it (text outside the
markers is kept).
"""


# --- statistics ------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0..100) with linear interpolation between ranks.

    The same definition as numpy's default, so figures agree with anyone who
    re-analyses the raw samples with numpy.

    Raises:
        ValueError: no values, or ``q`` outside 0..100.
    """
    if not values:
        raise ValueError("percentile of no values; run at least one sample.")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be within 0..100, got {q!r}.")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: Sequence[float]) -> float:
    """Raises: ValueError: no values."""
    return percentile(values, 50)


# --- the machine -----------------------------------------------------------


def _meminfo_kb(field: str) -> int | None:
    try:
        text = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    match = re.search(rf"^{re.escape(field)}:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def _cpu_model() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.processor() or "unknown CPU"
    match = re.search(r"^model name\s*:\s*(.+)$", text, re.MULTILINE)
    return match.group(1).strip() if match else (platform.processor() or "unknown CPU")


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask, not the host's count):
    what a container or ``taskset`` limits is what the benchmark gets."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True, slots=True)
class Machine:
    """Where the figures were taken."""

    cores: int
    ram_gib: float | None
    cpu: str
    python: str
    system: str
    date: str
    load: float | None
    """1-minute load average when described: other work on the machine shows up
    in tail latencies, so a reader needs to know it was there."""

    def markdown(self) -> str:
        ram = f"{self.ram_gib:.1f} GiB RAM" if self.ram_gib is not None else "RAM unknown"
        load = f", load average {self.load:.1f} at the start" if self.load is not None else ""
        return (
            f"{self.cores} cores ({self.cpu}), {ram}, Python {self.python}, "
            f"{self.system}; measured {self.date}{load}"
        )


def machine() -> Machine:
    """Describe this machine: cores, RAM, CPU, Python, OS, the date (UTC) and the
    current load. Call it before the measurements, so the load is theirs."""
    total_kb = _meminfo_kb("MemTotal")
    try:
        load: float | None = os.getloadavg()[0]
    except OSError:
        load = None
    return Machine(
        cores=usable_cores(),
        ram_gib=total_kb / 1024 / 1024 if total_kb is not None else None,
        cpu=_cpu_model(),
        python=platform.python_version(),
        system=f"{platform.system()} {platform.release()}",
        date=_dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        load=load,
    )


# --- /proc -----------------------------------------------------------------


def _pids() -> Iterator[int]:
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            yield int(entry.name)


def proc_cmdline(pid: int) -> list[str] | None:
    """A process's argv, or ``None`` if it is gone or not ours to read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def proc_environ(pid: int) -> dict[str, str] | None:
    """A process's environment at exec time, or ``None`` if unreadable."""
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    env: dict[str, str] = {}
    for item in raw.split(b"\0"):
        key, sep, value = item.partition(b"=")
        if sep:
            env[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return env


def pids_with_env(key: str, value: str) -> list[int]:
    """Processes whose environment has ``key=value``.

    A unique marker in a child's environment is the one reliable way to find
    a process some library spawned for us without its handle; children of that
    process inherit the marker too, so callers filter further (e.g. by argv).
    """
    found = []
    for pid in _pids():
        env = proc_environ(pid)
        if env is not None and env.get(key) == value:
            found.append(pid)
    return found


def proc_status_kib(pid: int, field: str) -> int | None:
    """A ``kB`` field of ``/proc/<pid>/status`` (``VmHWM`` is peak RSS, ``VmRSS``
    current), or ``None`` if the process is gone."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    match = re.search(rf"^{re.escape(field)}:\s+(\d+) kB", text, re.MULTILINE)
    return int(match.group(1)) if match else None


def proc_cpu_seconds(pid: int) -> float | None:
    """User + system CPU a process has used so far (its own, not its reaped
    children's), or ``None`` if it is gone. Resolution is one clock tick."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after its last ")".
    fields = text[text.rindex(")") + 2 :].split()
    utime, stime = int(fields[11]), int(fields[12])
    return (utime + stime) / os.sysconf("SC_CLK_TCK")


# --- reporting -------------------------------------------------------------


def verdict(passed: bool | None) -> str:
    """``PASS``/``FAIL`` for a figure with a target, ``-`` for one without."""
    if passed is None:
        return "-"
    return "PASS" if passed else "FAIL"


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub-flavoured markdown table; ``|`` in a cell is escaped."""

    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |"

    out = [line(headers), "|" + "|".join("---" for _ in headers) + "|"]
    out.extend(line(row) for row in rows)
    return "\n".join(out)


def rerun_command(script: str | Path, args: Sequence[str] = ()) -> str:
    """The shell command that reproduces a run, relative to the repository root."""
    path = Path(script).resolve()
    try:
        shown = str(path.relative_to(REPO_ROOT))
    except ValueError:
        shown = str(path)
    return shlex.join(["python", shown, *args])


def _markers(name: str) -> tuple[str, str]:
    if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
        raise ValueError(f"benchmark section name {name!r} must be letters, digits, '_' or '-'.")
    return f"<!-- bench:{name}:start -->", f"<!-- bench:{name}:end -->"


def replace_section(document: str, name: str, body: str) -> str:
    """``document`` with the section ``name`` replaced by ``body`` (appended if absent).

    Pure text in, text out, so the marker logic is testable without a file.

    Raises:
        ValueError: a bad section name, or markers present but out of order or duplicated.
    """
    start, end = _markers(name)
    section = f"{start}\n{body.strip()}\n{end}"
    n_start, n_end = document.count(start), document.count(end)
    if n_start == 0 and n_end == 0:
        base = document.rstrip("\n")
        return f"{base}\n\n{section}\n" if base else f"{section}\n"
    i, j = document.find(start), document.find(end)
    if n_start != 1 or n_end != 1 or j < i:
        raise ValueError(
            f"broken markers for benchmark section {name!r}; fix or delete {start} / {end} by hand and rerun."
        )
    return document[:i] + section + document[j + len(end) :]


def write_section(name: str, body: str, path: Path = BENCHMARKS_MD) -> Path:
    """Rewrite one benchmark's section of ``path`` (created with a header if missing).

    The file is replaced atomically, so a reader (or a second benchmark
    writing its own section) never sees half a file.

    Raises:
        ValueError: see :func:`replace_section`.
        OSError: the file cannot be read or written.
    """
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = PAGE_HEADER
    updated = replace_section(current, name, body)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(updated)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def section_body(
    title: str, intro: str, table: str, machine_info: Machine, command: str, notes: str = ""
) -> str:
    """The conventional layout of one section: heading, what is measured, the
    table, the machine, the command to rerun, then free-form notes."""
    parts = [
        f"## {title}",
        intro.strip(),
        table.strip(),
        f"**Machine:** {machine_info.markdown()}.",
        f"**Rerun:** `{command}`",
    ]
    if notes.strip():
        parts.append(notes.strip())
    return "\n\n".join(parts)
