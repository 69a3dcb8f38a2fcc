"""Redis Cluster failover and live resharding under a full load: what the writers were told, what is stored.

    python benchmarks/redis_cluster_failover.py [--first-port 7200] [--adds 200] [--memories 50] [--turns 500]

Starts a cluster of its own (3 masters + 3 replicas, ``cluster-node-timeout 1000``, on ``--first-port`` and
the 5 ports after it, with ``.ci/redis_failover_cluster``) and stops it at the end; it refuses to start if
anything answers on those ports. Then, on that cluster:

* **cost**: window memories (a tool call and its result per add) over two stores with history, plain and
  ``replicas_to_ack=1``, taking turns add by add (alternating which goes first) on memories of their own:
  p50 and p99 of an add after ``--warm`` untimed ones, sync;
* **runs**, once without ``replicas_to_ack`` and once with ``replicas_to_ack=1``: 8 writers round
  ``--memories`` memories, ``--adds`` adds each, window memories of ``--window`` over stores with history;
  2 sync threads in each of 2 processes and 2 asyncio tasks in each of 2 more, one store per process.
  Once a third of the adds are in, the master owning a third of the memories is SIGKILLed and its
  replica promoted (``CLUSTER FAILOVER TAKEOVER``); the dead node is started again 0.3 s later and
  rejoins as a replica. Once two thirds are in, the slots of another third move live to a third master
  (``SETSLOT IMPORTING/MIGRATING``, ``MIGRATE`` ``--migrate-batch`` keys at a time, ``SETSLOT NODE``).
  Afterwards each memory's history (every message ever added) and window are read and compared with
  what the writers were told (``tests/support/redis_cluster_faults.py``): acknowledged adds, those
  present, lost, doubled, windows holding a tool result without its call, the writers' errors by type,
  and how long after the kill the writers of the dead master's memories were back: the slowest writer's
  first add to one of them that returned after the kill, and the last add that failed.

Figures only, no assertions: this is not run in CI (``tests/stores/test_redis_failover.py`` is the
bounded check).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import queue
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

# Run as a script, this file's directory is first on sys.path, and benchmarks/redis.py would shadow redis-py.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [entry for entry in sys.path if os.path.abspath(entry or os.curdir) != _HERE]
_ROOT = os.path.dirname(_HERE)

from chatmemory import MessageWindowChatMemory, aio  # noqa: E402
from chatmemory.aio.stores.redis import RedisChatMemoryStore as AsyncRedisChatMemoryStore  # noqa: E402
from chatmemory.stores.redis import RedisChatMemoryStore  # noqa: E402

sys.path.append(os.path.join(_ROOT, "tests"))
from support.redis_cluster_faults import FaultyCluster, Findings, Ledger, check, slot_of, turn  # noqa: E402

PROCESSES = (("threads", 2), ("threads", 2), ("asyncio", 2), ("asyncio", 2))
"""Each writer process: how it writes, and how many writers it runs (8 in all)."""
RUN_DEADLINE = 600.0


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# ------------------------------------------------------------------------------------- the cluster


def _start_cluster(directory: Path, first: int) -> None:
    for port in range(first, first + 6):
        with socket.socket() as probe:
            probe.settimeout(0.5)
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                raise SystemExit(f"something answers on port {port}: pick free ports with --first-port")
    subprocess.run(
        [os.path.join(_ROOT, ".ci", "redis_failover_cluster"), "start", str(directory), str(first)], check=True
    )


def _stop_cluster(directory: Path) -> None:
    subprocess.run([os.path.join(_ROOT, ".ci", "redis_failover_cluster"), "stop", str(directory)], check=False)


def _layout(cluster: FaultyCluster, prefix: str, count: int, url: str) -> dict[int, list[str]]:
    """``count`` memory ids spread over the masters as evenly as they go, by the port of each one's master."""
    probe = RedisChatMemoryStore(url, key_prefix=prefix)
    try:
        masters = cluster.masters()
        quota = {
            node.port: count // len(masters) + (index < count % len(masters)) for index, node in enumerate(masters)
        }
        chosen: dict[int, list[str]] = {port: [] for port in quota}
        index = 0
        while any(len(chosen[port]) < quota[port] for port in quota):
            memory_id = f"m{index}"
            index += 1
            slot = slot_of(probe.keys_of(memory_id)[0])
            port = next(node.port for node in masters if node.owns(slot))
            if len(chosen[port]) < quota[port]:
                chosen[port].append(memory_id)
    finally:
        probe.close()
    return chosen


# --------------------------------------------------------------------------------------- writers


def _plan(writer: int, memories: list[str], adds: int) -> list[tuple[str, str]]:
    return [(memories[(writer * 7 + index) % len(memories)], f"w{writer}-{index}") for index in range(adds)]


def _writer_process(
    kind: str,
    writers: list[int],
    url: str,
    options: dict[str, Any],
    memories: list[str],
    adds: int,
    window: int,
    done: Any,
    ready: Any,
    go: Any,
    out: Any,
) -> None:
    """Run ``writers`` (threads or asyncio tasks on one store) and send back the ledger and every add's timing.

    The store is connected (one read) before the process says it is ``ready``: a cluster client connects
    through the URL's node, which may be the one killed.
    """
    ledger = Ledger()
    events: list[tuple[int, str, float, float, bool]] = []
    lock = threading.Lock()

    def record(writer: int, memory_id: str, tag: str, started: float, error: BaseException | None) -> None:
        ledger.record(memory_id, tag, started, error)
        with lock:
            events.append((writer, memory_id, started, time.monotonic(), error is None))
        with done.get_lock():
            done.value += 1

    if kind == "threads":
        store = RedisChatMemoryStore(url, **options)
        store.load(memories[0])
        with ready.get_lock():
            ready.value += 1

        def write(writer: int) -> None:
            windows = {m: MessageWindowChatMemory(m, max_messages=window, store=store) for m in memories}
            for memory_id, tag in _plan(writer, memories, adds):
                started = time.monotonic()
                try:
                    windows[memory_id].add(*turn(tag))
                except Exception as exc:
                    record(writer, memory_id, tag, started, exc)
                else:
                    record(writer, memory_id, tag, started, None)

        go.wait()
        threads = [threading.Thread(target=write, args=(writer,)) for writer in writers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        store.close()
    else:

        async def main() -> None:
            store = AsyncRedisChatMemoryStore(url, **options)
            await store.load(memories[0])
            with ready.get_lock():
                ready.value += 1

            async def write(writer: int) -> None:
                windows = {m: aio.MessageWindowChatMemory(m, max_messages=window, store=store) for m in memories}
                for memory_id, tag in _plan(writer, memories, adds):
                    started = time.monotonic()
                    try:
                        await windows[memory_id].add(*turn(tag))
                    except Exception as exc:
                        record(writer, memory_id, tag, started, exc)
                    else:
                        record(writer, memory_id, tag, started, None)

            await asyncio.to_thread(go.wait)
            try:
                await asyncio.gather(*(write(writer) for writer in writers))
            finally:
                await store.aclose()

        asyncio.run(main())
    out.put((ledger.export(), dict(ledger.samples), events))


# ------------------------------------------------------------------------------------------ a run


def _contents(url: str, prefix: str, memories: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    reader = RedisChatMemoryStore(url, key_prefix=prefix, history=True, snapshot_cache_size=0)
    try:
        histories = {m: reader.history(m, limit=10_000).messages for m in memories}
        windows = {m: reader.get_messages(m) for m in memories}
        for memory_id in memories:
            reader.delete_messages(memory_id)
    finally:
        reader.close()
    return histories, windows


def _run(cluster: FaultyCluster, url: str, args: argparse.Namespace, replicas_to_ack: int) -> dict[str, Any]:
    cluster.wait_healthy()
    prefix = f"cmbench{uuid.uuid4().hex[:8]}:"
    by_master = _layout(cluster, prefix, args.memories, url)
    memories = [memory_id for ids in by_master.values() for memory_id in ids]
    masters = cluster.masters()
    victim, source, target = masters[0], masters[1], masters[2]
    doomed, moving = set(by_master[victim.port]), by_master[source.port]
    options = {"key_prefix": prefix, "history": True, "replicas_to_ack": replicas_to_ack, "replicas_timeout": 0.5}
    probe = RedisChatMemoryStore(url, key_prefix=prefix)
    slots = sorted({slot_of(probe.keys_of(memory_id)[0]) for memory_id in moving})
    probe.close()

    context = multiprocessing.get_context("spawn")
    done, ready, go, out = context.Value("i", 0), context.Value("i", 0), context.Event(), context.Queue()
    processes = []
    first = 0
    for kind, count in PROCESSES:
        writers = list(range(first, first + count))
        first += count
        process = context.Process(
            target=_writer_process,
            args=(kind, writers, url, options, memories, args.adds, args.window, done, ready, go, out),
        )
        process.start()
        processes.append(process)
    total = first * args.adds
    moments: dict[str, float] = {}
    deadline = time.monotonic() + RUN_DEADLINE

    def wait_for(count: int) -> None:
        while done.value < count and time.monotonic() < deadline and any(p.is_alive() for p in processes):
            time.sleep(0.005)

    while ready.value < len(processes):  # the processes import chatmemory and connect their stores
        if time.monotonic() > deadline or not all(process.is_alive() for process in processes):
            for process in processes:
                process.kill()
            raise SystemExit("a writer process did not start (its error is above)")
        time.sleep(0.05)
    moments["start"] = time.monotonic()
    go.set()
    wait_for(total // 3)
    moments["killed"] = time.monotonic()
    killed, _ = cluster.fail_over(victim)
    moments["promoted"] = time.monotonic()
    time.sleep(0.3)
    cluster.restart(killed)
    wait_for(2 * total // 3)
    refusals_before = cluster.refusals()  # after the restart: a restarted node's counts start again
    moments["reshard"] = time.monotonic()
    cluster.move_slots(slots, target, batch=args.migrate_batch, pause=args.migrate_pause)
    moments["resharded"] = time.monotonic()

    ledger = Ledger()
    samples: dict[str, str] = {}
    events: list[tuple[int, str, float, float, bool]] = []
    for _ in processes:
        try:
            exported, their_samples, their_events = out.get(timeout=max(1.0, deadline - time.monotonic()))
        except queue.Empty:
            break
        ledger.merge(exported)
        for name, sample in their_samples.items():
            samples.setdefault(name, sample)
        events.extend(their_events)
    for process in processes:
        process.join(5)
        if process.is_alive():
            process.kill()
    moments["end"] = time.monotonic()
    refused = cluster.refusals() - refusals_before
    cluster.wait_healthy()
    findings = check(ledger, *_contents(url, prefix, memories))

    killed_at = moments["killed"]
    back: dict[int, float] = {}
    for writer, memory_id, _started, ended, ok in sorted(events, key=lambda event: event[3]):
        if ok and memory_id in doomed and ended > killed_at and writer not in back:
            back[writer] = ended - killed_at
    failed_after = [ended - killed_at for _w, _m, _s, ended, ok in events if not ok and ended > killed_at]
    return {
        "replicas_to_ack": replicas_to_ack,
        "findings": findings,
        "samples": samples,
        "latencies": ledger.latencies,
        "seconds": moments["end"] - moments["start"],
        "promoted": moments["promoted"] - killed_at,
        "back": max(back.values(), default=float("nan")),
        "writers_back": len(back),
        "last_error": max(failed_after, default=None),
        "moved": len(slots),
        "moved_in": moments["resharded"] - moments["reshard"],
        "refused": refused,
        "memories": (len(doomed), len(moving), len(memories)),
        "writers": first,
    }


# ------------------------------------------------------------------------------------------- cost


def _cost(url: str, args: argparse.Namespace) -> dict[str, list[float]]:
    """An add's time, plain store against replicas_to_ack=1, taking turns add by add."""
    prefix = f"cmcost{uuid.uuid4().hex[:8]}:"
    stores = {
        "plain": RedisChatMemoryStore(url, key_prefix=prefix + "p:", history=True),
        "replicas_to_ack=1": RedisChatMemoryStore(url, key_prefix=prefix + "r:", history=True, replicas_to_ack=1),
    }
    timings: dict[str, list[float]] = {name: [] for name in stores}
    try:
        memories = {
            name: MessageWindowChatMemory("cost", max_messages=args.window, store=store)
            for name, store in stores.items()
        }
        names = list(memories)
        for index in range(args.warm + args.turns):
            order = names if index % 2 == 0 else names[::-1]
            for name in order:
                messages = turn(f"t{index}")
                started = time.perf_counter()
                memories[name].add(*messages)
                elapsed = time.perf_counter() - started
                if index >= args.warm:
                    timings[name].append(elapsed)
        for store in stores.values():
            store.delete_messages("cost")
    finally:
        for store in stores.values():
            store.close()
    return timings


# ------------------------------------------------------------------------------------------ report


def _errors(findings: Findings) -> str:
    return ", ".join(f"{count} {name}" for name, count in sorted(findings.errors.items())) or "none"


def _print_runs(runs: list[dict[str, Any]]) -> None:
    print("\n| run | acknowledged | present | lost | doubled | broken windows | errors |")
    print("|---|---|---|---|---|---|---|")
    for run in runs:
        findings: Findings = run["findings"]
        name = "`replicas_to_ack=1`" if run["replicas_to_ack"] else "plain"
        print(
            f"| {name} | {findings.acknowledged} | {findings.present} | {len(findings.lost)} | "
            f"{len(findings.doubled)} | {len(findings.broken_windows)} | {_errors(findings)} |"
        )
    print(
        "\n| run | promoted after | writers back after | last error after | slots moved | moved in | "
        "refusals (ASK / MOVED / TRYAGAIN) | add p50 / p99 | run |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for run in runs:
        name = "`replicas_to_ack=1`" if run["replicas_to_ack"] else "plain"
        refused = run["refused"]
        last = "none" if run["last_error"] is None else f"{run['last_error']:.2f} s"
        latencies = run["latencies"]
        print(
            f"| {name} | {run['promoted']:.2f} s | {run['back']:.2f} s ({run['writers_back']} writers) | {last} | "
            f"{run['moved']} | {run['moved_in']:.2f} s | {refused['ASK']} / {refused['MOVED']} / "
            f"{refused['TRYAGAIN']} | {_percentile(latencies, 0.5) * 1000:.2f} / "
            f"{_percentile(latencies, 0.99) * 1000:.1f} ms | {run['seconds']:.1f} s |"
        )
    for run in runs:
        if run["samples"]:
            print(f"\nreplicas_to_ack={run['replicas_to_ack']}, an error of each type:")
            for name, sample in run["samples"].items():
                print(f"  {name}: {sample[:300]}")
        findings = run["findings"]
        if findings.lost or findings.doubled or findings.broken_windows or findings.not_store_errors:
            print(
                f"\nreplicas_to_ack={run['replicas_to_ack']}: lost {findings.lost[:10]}, "
                f"doubled {findings.doubled[:10]}, broken {findings.broken_windows[:10]}, "
                f"not StoreErrors {findings.not_store_errors[:5]}"
            )


def _print_cost(timings: dict[str, list[float]]) -> None:
    print("\n| store | p50 per add | p99 per add |")
    print("|---|---|---|")
    for name, samples in timings.items():
        label = name if name == "plain" else f"`{name}`"
        print(f"| {label} | {statistics.median(samples) * 1000:.2f} ms | {_percentile(samples, 0.99) * 1000:.2f} ms |")


def _stopped(signum: int, frame: object) -> None:
    raise SystemExit(f"stopped by signal {signum}")  # so that the cluster is stopped on the way out


def main() -> None:
    signal.signal(signal.SIGTERM, _stopped)
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--first-port", type=int, default=7200, help="the cluster's first port (6 in a row)")
    parser.add_argument("--adds", type=int, default=200, help="adds per writer (8 writers)")
    parser.add_argument("--memories", type=int, default=50)
    parser.add_argument("--window", type=int, default=10, help="messages a window memory keeps")
    parser.add_argument("--turns", type=int, default=500, help="timed adds per store for the cost")
    parser.add_argument("--warm", type=int, default=50, help="untimed adds per store before them")
    parser.add_argument("--migrate-batch", type=int, default=1, help="keys per MIGRATE (redis-cli's: 10)")
    parser.add_argument("--migrate-pause", type=float, default=0.01, help="seconds after each MIGRATE")
    args = parser.parse_args()

    directory = Path(tempfile.mkdtemp(prefix="chatmemory-failover-"))
    url = f"redis+cluster://127.0.0.1:{args.first_port}"
    try:
        _start_cluster(directory, args.first_port)
        cluster = FaultyCluster(directory)
        cluster.wait_healthy()  # every replica in sync before the first WAIT
        print(
            f"cluster: 3 masters + 3 replicas on {args.first_port}-{args.first_port + 5}, cluster-node-timeout "
            f"1000 ms; {sum(count for _, count in PROCESSES)} writers x {args.adds} adds over {args.memories} "
            f"memories (window {args.window}, history on), {os.cpu_count()} cores"
        )
        print(f"\ncost of an add, {args.turns} per store after {args.warm} warm, taking turns (sync):")
        _print_cost(_cost(url, args))
        runs = []
        for replicas_to_ack in (0, 1):
            run = _run(cluster, url, args, replicas_to_ack)
            doomed, moving, count = run["memories"]
            print(
                f"\nrun replicas_to_ack={replicas_to_ack}: {doomed} of {count} memories on the killed master, "
                f"{moving} moved; {run['seconds']:.1f} s",
                flush=True,
            )
            runs.append(run)
        _print_runs(runs)
    finally:
        _stop_cluster(directory)
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
