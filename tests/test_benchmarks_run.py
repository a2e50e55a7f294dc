"""The benchmark scripts still run (a smoke run; figures are read by people, not asserted).

The runs are marked `slow` (minutes between them): `pytest -m "not slow"` leaves them out."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"
CEILINGS = {
    "ceiling: asyncio + httptools",
    "ceiling: uvloop + httptools",
    "ceiling: trio + httptools",
}
"""The fixed-answer servers on httptools that `compare.py` reads ours against."""


@pytest.mark.slow
def test_core_benchmark_runs_and_reports_every_figure() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / "core.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    figures = json.loads(out.stdout)
    assert figures["tasks_get"]["operations"] > 0 and figures["task_life"]["operations"] > 0
    assert figures["memory"]["tasks"] > 0 and figures["memory"]["payload_per_task"] > 0


@pytest.mark.slow
def test_stores_benchmark_runs_and_reports_every_figure() -> None:
    """Memory, SQLite and Redis over HTTP, and the cross-process signals on Redis and on
    SQLite opened shared."""
    if shutil.which("redis-server") is None:
        hint = "redis-server is not installed (Debian/Ubuntu: sudo apt-get install redis-server)"
        if os.environ.get("CI"):
            pytest.fail(hint)
        pytest.skip(hint)
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / "stores.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    figures = json.loads(out.stdout)
    assert set(figures["throughput"]) == {"tasks/get", "tools/call quick"}
    for workload in figures["throughput"].values():
        for store in ("memory", "sqlite", "redis"):
            run = workload[store]
            assert run["requests"] > 0 and run["failures"] == 0, (store, run)
            for figure in ("requests_per_second", "p50_ms", "p99_ms"):
                assert run[figure] > 0, (store, figure, run)
            assert workload["ratio_to_memory"][store] > 0
    for key in ("cross_process", "cross_process_sqlite"):
        assert set(figures[key]) == {"tasks/cancel", "tasks/update"}
        for latency in figures[key].values():
            assert latency["count"] > 0
            for figure in ("p50_ms", "p99_ms", "max_ms"):
                assert latency[figure] > 0, (key, figure, latency)


@pytest.mark.slow
def test_soak_scripts_run_and_pass_their_verdicts() -> None:
    """soak/load.py and soak/soak.py, --quick: the load's errors, lost results and the
    refusal of one task too many; the soak's RSS, descriptors, trio tasks and leftovers.
    Both within one minute."""
    soak = Path(__file__).parent.parent / "soak"
    deadline = time.monotonic() + 60

    def run(script: str) -> dict[str, Any]:
        out = subprocess.run(
            [sys.executable, str(soak / script), "--quick", "--json"],
            capture_output=True,
            text=True,
            check=False,
            timeout=max(1.0, deadline - time.monotonic()),
        )
        assert out.stdout.strip(), out.stderr
        figures: dict[str, Any] = json.loads(out.stdout)
        assert (out.returncode == 0) == figures["passed"], (out.returncode, out.stderr)
        return figures

    load = run("load.py")
    assert load["created"] == load["tasks"] == load["max_tasks"] > 0
    assert load["errors"] == 0 and load["lost_results"] == 0, load["error_samples"]
    assert load["wrong_results"] == 0 and load["answered"] > 0
    for when in ("refusal_after_creation", "refusal_at_end"):
        refusal = load[when]
        assert refusal["refused"] and refusal["code"] == -32603, refusal
        assert refusal["message"].startswith("Too many tasks: the server holds its limit of")
    assert load["requests"] > 0 and load["latency"]["all"]["p99_ms"] > 0
    assert load["server_rss_kib"]["peak"] > 0 and load["passed"]

    soaked = run("soak.py")
    verdicts = soaked["verdicts"]
    assert set(verdicts) == {"load", "rss", "fds", "trio_tasks", "left_over"}
    assert all(verdict["ok"] for verdict in verdicts.values()), verdicts
    assert verdicts["fds"]["final"] == verdicts["fds"]["baseline"]
    assert verdicts["trio_tasks"]["final"] == verdicts["trio_tasks"]["baseline"]
    assert verdicts["trio_tasks"]["walk_matches_tasks_living"]
    assert all(count > 0 for count in soaked["load"]["scenarios_ok"].values())
    assert soaked["passed"]


@pytest.mark.slow
def test_side_by_side_benchmark_runs_ours_and_the_limit_and_writes_its_page(
    tmp_path: Path,
) -> None:
    """`compare.py` without the peers (their venv is `benchmarks/run`'s job): every figure
    of ours, the limit and the ceilings comes out, with no failed request, and the page and
    chart are written."""
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / "compare.py"), "--quick", "--peers-python", "none",
         "--json", "--write-docs", "--docs-dir", str(tmp_path)],
        capture_output=True, text=True, check=True, timeout=600,
    )  # fmt: skip
    figures = json.loads(out.stdout)
    embedded = {"ASGI (uvicorn)", "ASGI (uvicorn, h11)", "ASGI (hypercorn)", "SDK + TasksExtension"}
    observed = {"mcp_tasks, INFO logs", "mcp_tasks, OpenTelemetry", "mcp_tasks, recording"}
    for workload, entry in figures["http"].items():
        with_tasks = workload != "sync tool calls (HTTP)"
        ours = {"mcp_tasks", "mcp_tasks on trio", "limit", *CEILINGS, *observed}
        expected = ours | (embedded if with_tasks else set())
        if "2025 session" in workload:  # a 2025-11-25 client: ours (and the SDK's, a peer),
            expected = {"mcp_tasks", "mcp_tasks, 2026-07-28 client"}  # a modern one between
        assert set(entry) == expected, workload
        for server, run in entry.items():
            assert run["count"] > 0 and run["failures"] == 0, (workload, server, run)
    lives = figures["http"]["task lives"]
    assert lives["mcp_tasks"]["polls_per_life"] >= 1 and lives["mcp_tasks"]["generator"] == "wrk"
    for server, run in figures["stdio"].items():
        assert run["count"] > 0 and run["failures"] == 0 and run["unanswered"] == 0, server
    points = figures["stored"]["mcp_tasks"]["points"]
    assert [point["stored"] for point in points] == [100, 600, 1_500]
    assert all(point["bytes_per_task"] > 0 for point in points[1:])
    met = {aim["figure"]: aim["met"] for aim in figures["aims"]}
    assert met["task creations/s"] is None  # no fastmcp-tasks to compare with
    assert met["task lives/s, SDK + TasksExtension"] is None
    assert met["tasks/get/s on asyncio"] in (True, False)
    assert met["task lives/s on trio"] in (True, False)
    assert met["wrk's share of its core, ceiling: uvloop + httptools, tasks/get"] in (True, False)
    assert met["wrk's share of its core, ceiling: trio + httptools, task lives"] in (True, False)
    assert met["tasks/get req/s, built-in server"] in (True, False)
    assert met["tasks/get req/s, logging at INFO"] in (True, False)
    assert met["tasks/get req/s, HTTP, 2025 session"] in (True, False)
    assert met["loadgen's share of its core, ceiling: stdio echo"] in (True, False)
    against_echo = [a for a in figures["aims"] if a["against"] == "ceiling: stdio echo"]
    assert [a["met"] in (True, False) for a in against_echo] == [True]  # ours over stdio
    assert "| tasks/get, HTTP (per second) |" in (tmp_path / "benchmarks.md").read_text()
    page = (tmp_path / "benchmarks.md").read_text()
    assert "| tasks/get (req/s) |" in page and "benchmarks.png" in page
    assert (tmp_path / "benchmarks.png").read_bytes().startswith(b"\x89PNG")
    assert json.loads((tmp_path / "benchmarks.json").read_text())["aims"] == figures["aims"]
    for loop in ("asyncio", "trio"):  # where the time goes: the parts add up
        for parts in figures["split"][loop].values():
            assert 0 < parts["head_us"] < parts["connection_us"]
            assert parts["server_us"] + parts["transport_us"] == pytest.approx(
                parts["connection_us"], abs=0.2
            )
    workers = figures["workers"]  # serve --workers 2 beside one, on Redis and on SQLite
    for measured in (workers, workers["sqlite"]):
        for workload in ("greet", "tasks/get"):
            for count in ("workers_1", "workers_2"):
                run = measured[workload][count]
                assert run["count"] > 0 and run["failures"] == 0, (workload, count)
    assert "| where the time goes (CPU us a request) |" in page
    assert "| `serve --workers` (per second) |" in page
    assert "| tasks/get, Redis |" in page and "| tasks/get, SQLite |" in page


@pytest.mark.slow
def test_the_one_command_installs_the_peers_and_measures_them_side_by_side() -> None:
    """`benchmarks/run --quick` on this checkout: the peers' venv from PyPI (pinned; kept
    for the next run), then every server of the comparison answers every workload it has."""
    out = subprocess.run(
        [str(BENCHMARKS / "run"), "--quick", "--json"],
        check=False, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    figures = json.loads(out.stdout)
    peers = {"fastmcp-tasks", "official SDK", "TypeScript SDK"}
    assert figures["versions"]["fastmcp-tasks"] == "4.1.4" and figures["versions"]["mcp"] == "2.3.0"
    observed = {"mcp_tasks, INFO logs", "mcp_tasks, OpenTelemetry", "mcp_tasks, recording"}
    synchronous = {"mcp_tasks", "mcp_tasks on trio", "limit", *CEILINGS, *peers, *observed}
    assert set(figures["http"]["sync tool calls (HTTP)"]) == synchronous
    embedded = {"ASGI (uvicorn)", "ASGI (uvicorn, h11)", "ASGI (hypercorn)", "SDK + TasksExtension"}
    with_tasks = {"mcp_tasks", "mcp_tasks on trio", "limit", *CEILINGS, "fastmcp-tasks", *embedded,
                  *observed}  # fmt: skip
    assert set(figures["http"]["tasks/get"]) == with_tasks
    legacy = figures["http"]["sync tool calls (HTTP, 2025 session)"]
    paired = "mcp_tasks, 2026-07-28 client"  # its rounds alternate with the 2025 client's
    assert set(legacy) == {"mcp_tasks", paired, "official SDK"}
    assert set(figures["http"]["tasks/get (HTTP, 2025 session)"]) == {"mcp_tasks", paired}
    assert set(figures["stdio"]) == {
        "mcp_tasks",
        "mcp_tasks on trio",
        "limit",
        "ceiling: stdio echo",
        "official SDK",
        "mcp_tasks, 2025 session",
        "official SDK, 2025 session",
    }
    for workload, entry in [*figures["http"].items(), ("stdio", figures["stdio"])]:
        for server, run in entry.items():
            assert run["count"] > 0 and run["failures"] == 0, (workload, server, run)
    assert set(figures["stored"]) == {"mcp_tasks", "fastmcp-tasks"}
    assert all(aim["ratio"] is not None for aim in figures["aims"])


def test_the_benchmarks_page_shows_the_figures_of_its_json() -> None:
    """docs/benchmarks.md is `benchmarks/run`'s output, not edited by hand: its tables are
    the ones its JSON renders to, and every aim of the issue is in them."""
    docs = BENCHMARKS.parent / "docs"
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / "compare.py"), "--peers-python", "none",
         "--from-json", str(docs / "benchmarks.json")],
        capture_output=True, text=True, check=True, timeout=120,
    )  # fmt: skip
    assert out.stdout.strip() in (docs / "benchmarks.md").read_text()
    figures = json.loads((docs / "benchmarks.json").read_text())
    assert len(figures["aims"]) == 45
    measured = {name for entry in [*figures["http"].values(), figures["stdio"]] for name in entry}
    for aim in figures["aims"]:  # an aim without a ratio: its server was not measured then
        if not aim["ratio"]:
            named = aim["figure"].rpartition(", ")[2] if aim["against"] == "one core" else None
            assert (named or aim["against"]) not in measured, aim
    assert (docs / "benchmarks.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_listen_benchmark_runs_and_reports_both_rates() -> None:
    """Task creations with no listen stream open and with streams open (50 in the smoke run)."""
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / "listen.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    figures = json.loads(out.stdout)
    assert figures["streams"] == 50 and figures["task_ids_per_stream"] == 16
    for run in (figures["none"], figures["with_streams"]):
        assert run["count"] > 0 and run["failures"] == 0, run
    assert figures["ratio"] > 0


@pytest.mark.slow
def test_generators_benchmark_drives_the_uvloop_ceiling_from_wrk_and_h2load() -> None:
    """Both C generators load the fastest fixed-answer server: every answer a 2xx, and each
    generator's share of its core measured (what the generator check rests on)."""
    missing = [tool for tool in ("wrk", "h2load") if shutil.which(tool) is None]
    if missing:
        hint = f"{' and '.join(missing)} not installed (Debian: apt-get install wrk nghttp2-client)"
        if os.environ.get("CI"):
            pytest.fail(hint)
        pytest.skip(hint)
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / "generators.py"), "--seconds", "1", "--rounds", "1"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    figures = json.loads(out.stdout)
    assert figures["server"] == "ceiling: uvloop + httptools"
    assert set(figures["generators"]) == {"wrk", "h2load"}
    for name, run in figures["generators"].items():
        assert run["per_second"] > 0 and run["failures"] == 0, (name, run)
        assert 0 < run["load_cpu_share"] <= 1.05, (name, run)  # one thread: one core at most
        assert len(run["every_run"]) == 1, (name, run)
