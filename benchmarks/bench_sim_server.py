"""The simulator as a server: latency on kept-alive connections, searches per second, and memory over many requests.

What it measures, against a simulator in its own process (``benchmarks/simproc.py``: one event loop, one core):
- the latency of one request (``GET /api/v0/users/current``) on a kept-alive connection, and on a fresh connection
  per request (what the official CLI does), interleaved;
- searches per second (``POST /api/v0/bundles/`` with the example manifest's shortlist query) with 1 and with 50
  concurrent kept-alive connections;
- the simulator's resident memory after a warm-up, and again after 100,000 more requests (its request log is a ring).

Why these baselines: a kept-alive request must cost no more than a fresh one (a stall here is Nagle's algorithm
meeting a delayed ACK: ~40 ms, which a ×120 clock turns into minutes); the throughput floor is the same uvicorn
server on the same kind of socket with a bare ASGI app that answers the same bytes as the search, so the ratio is
what the simulator costs on top of its HTTP stack. Memory is compared with itself before the 100,000 requests.
The load generator is plain asyncio streams with pre-built requests, so the client costs as little as it can.
"""

from __future__ import annotations

import asyncio
import json
import socket
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from simproc import SimProcess
from timing import Comparison, parse_options, rate_line, ratio_line

from vastui.vast.query import build_search_body

QUERY = "gpu_ram>=16 num_gpus=1 cuda_vers>=12.1 reliability>0.98 inet_down>200"  # examples/resnet.toml
SEARCH_BODY = json.dumps(build_search_body(QUERY, order="dlperf_usd-", limit=400)).encode()


def _request(method: str, path: str, host: str, key: str, body: bytes = b"") -> bytes:
    head = (f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n")
    return head.encode() + body


def _read_reply(sock: socket.socket, pending: bytearray) -> bytes:
    """One HTTP/1.1 reply (Content-Length framed) from a blocking socket; leftovers stay in ``pending``."""
    while b"\r\n\r\n" not in pending:
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("the simulator closed the connection")
        pending += chunk
    head, _, _ = bytes(pending).partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length"))
    total = len(head) + 4 + length
    while len(pending) < total:
        pending += sock.recv(65536)
    if not head.startswith(b"HTTP/1.1 200"):
        raise SystemExit(f"unexpected reply: {head[:80]!r}")
    reply = bytes(pending[len(head) + 4:total])
    del pending[:total]
    return reply


def latency(url: str, key: str, *, rounds: int) -> Comparison:
    """Median seconds per request: kept-alive connection vs a fresh connection each time, interleaved."""
    parts = urlsplit(url)
    address = (parts.hostname or "127.0.0.1", parts.port or 80)
    request = _request("GET", "/api/v0/users/current", parts.netloc, key)
    kept = socket.create_connection(address)
    pending = bytearray()
    kept_s, fresh_s = [], []
    try:
        for _ in range(rounds + 1):
            start = time.perf_counter()
            kept.sendall(request)
            _read_reply(kept, pending)
            kept_s.append(time.perf_counter() - start)
            start = time.perf_counter()
            with socket.create_connection(address) as fresh:
                fresh.sendall(request)
                _read_reply(fresh, bytearray())
            fresh_s.append(time.perf_counter() - start)
    finally:
        kept.close()
    return Comparison(statistics.median(kept_s[1:]), statistics.median(fresh_s[1:]))


async def _client(url: str, request: bytes, deadline: float, counts: list[int]) -> None:
    parts = urlsplit(url)
    reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
    try:
        while time.perf_counter() < deadline:
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                          if line.lower().startswith(b"content-length"))
            await reader.readexactly(length)
            if not head.startswith(b"HTTP/1.1 200"):
                raise SystemExit(f"unexpected reply: {head[:80]!r}")
            counts[0] += 1
    finally:
        writer.close()
        await writer.wait_closed()


async def _load(url: str, request: bytes, *, connections: int, seconds: float) -> float:
    """Requests per second over ``seconds`` with ``connections`` kept-alive connections, each one request in flight."""
    counts = [0]
    start = time.perf_counter()
    await asyncio.gather(*(_client(url, request, start + seconds, counts) for _ in range(connections)))
    return counts[0] / (time.perf_counter() - start)


def searches_per_s(sim: SimProcess, floor: SimProcess, *, connections: int, seconds: float,
                   rounds: int) -> Comparison:
    """Seconds per search (as a Comparison, for rate_line): simulator vs the floor server, interleaved rounds."""
    ours, base = [], []
    for _ in range(rounds):
        for target, into in ((sim, ours), (floor, base)):
            request = _request("POST", "/api/v0/bundles/", urlsplit(target.url).netloc, target.key, SEARCH_BODY)
            into.append(asyncio.run(_load(target.url, request, connections=connections, seconds=seconds)))
    return Comparison(1.0 / statistics.median(ours), 1.0 / statistics.median(base))


def memory(sim: SimProcess, *, warmup: int, requests: int) -> tuple[float, float]:
    """(RSS MiB after ``warmup`` requests, RSS MiB after ``requests`` more), 50 connections of cheap requests."""
    request = _request("GET", "/api/v0/users/current", urlsplit(sim.url).netloc, sim.key)

    async def send(count: int) -> None:
        per_connection = count // 50

        async def one() -> None:
            parts = urlsplit(sim.url)
            reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
            for _ in range(per_connection):
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                              if line.lower().startswith(b"content-length"))
                await reader.readexactly(length)
            writer.close()
            await writer.wait_closed()

        await asyncio.gather(*(one() for _ in range(50)))

    asyncio.run(send(warmup))
    before = sim.rss_mib()
    asyncio.run(send(requests))
    return before, sim.rss_mib()


def main() -> None:
    options = parse_options(__doc__)
    quick = options.quick
    rounds, seconds = (1, 0.3) if quick else (3, 3.0)
    with tempfile.TemporaryDirectory(prefix="vastui-bench-sim-") as folder, SimProcess() as sim:
        answer = Path(folder) / "answer.json"
        probe = socket.create_connection((urlsplit(sim.url).hostname or "", urlsplit(sim.url).port or 80))
        probe.sendall(_request("POST", "/api/v0/bundles/", urlsplit(sim.url).netloc, sim.key, SEARCH_BODY))
        answer.write_bytes(_read_reply(probe, bytearray()))
        probe.close()
        hits = len(json.loads(answer.read_bytes())["offers"])
        with SimProcess(floor=answer) as floor:
            lat = latency(sim.url, sim.key, rounds=20 if quick else 300)
            one = searches_per_s(sim, floor, connections=1, seconds=seconds, rounds=rounds)
            fifty = searches_per_s(sim, floor, connections=50, seconds=seconds, rounds=rounds)
        warmup, requests = (500, 2_000) if quick else (20_000, 100_000)
        before, after = memory(sim, warmup=warmup, requests=requests)
    print(f"# simulator in its own process; a search answers {hits} offers (the shortlist query); floor: the same "
          f"uvicorn stack answering the same bytes; searches: median of {rounds} rounds x {seconds:g} s")
    print(ratio_line("sim.latency kept-alive vs fresh connection", lat))
    print(f"# kept-alive minus fresh: {(lat.ours_s - lat.baseline_s) * 1e3:+.2f} ms (target: at most +1 ms)")
    print(rate_line("sim.searches/s, 1 connection, vs HTTP floor", one, unit="req/s"))
    print(rate_line("sim.searches/s, 50 connections, vs HTTP floor", fifty, unit="req/s"))
    print(f"# memory: {before:.1f} MiB after {warmup:,} requests, {after:.1f} MiB after {requests:,} more "
          f"({after - before:+.1f} MiB; target: within ±5 MiB)")


if __name__ == "__main__":
    main()
