"""A Redis Cluster with replicas under faults: failing a master over, moving slots, and writers that keep count.

The cluster is the one ``.ci/redis_failover_cluster`` starts (3 masters + 3 replicas; each node's pid file
and the command that started it in ``CHATMEMORY_TEST_REDIS_FAILOVER_DIR/<port>/``), named by
``CHATMEMORY_TEST_REDIS_FAILOVER_URL``. :class:`FaultyCluster` SIGKILLs a master, promotes its replica
(``CLUSTER FAILOVER TAKEOVER``), starts the dead node again (it rejoins as a replica) and moves slots as
``redis-cli --cluster reshard`` does. :class:`Ledger` records what writers were told about each add, and
:func:`check` compares it with what the memories hold. Used by ``tests/stores/test_redis_failover*.py`` and
by ``benchmarks/redis_cluster_failover.py`` (full-size runs).
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis import Redis
from redis.crc import key_slot

from chatmemory import (
    AiMessage,
    StoreError,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
)
from chatmemory.core.messages import ChatMessage

FAILOVER_EXAMPLE = "redis+cluster://127.0.0.1:7100"
HEALTHY_WITHIN = 30.0
"""Seconds a restored cluster has to be whole again (every slot served, every master with a synced replica)."""


@dataclass(frozen=True)
class Node:
    """One line of ``CLUSTER NODES``."""

    node_id: str
    port: int
    master: bool
    master_id: str | None
    slots: tuple[tuple[int, int], ...]
    failed: bool

    def owns(self, slot: int) -> bool:
        return any(low <= slot <= high for low, high in self.slots)


def _parse_nodes(text: str) -> list[Node]:
    nodes = []
    for line in text.strip().splitlines():
        fields = line.split()
        flags = fields[2].split(",")
        ranges = []
        for part in fields[8:]:
            if part.startswith("["):  # a slot being migrated or imported: not owned yet
                continue
            low, _, high = part.partition("-")
            ranges.append((int(low), int(high or low)))
        nodes.append(
            Node(
                node_id=fields[0],
                port=int(fields[1].split("@")[0].rsplit(":", 1)[1]),
                master="master" in flags,
                master_id=None if fields[3] == "-" else fields[3],
                slots=tuple(ranges),
                failed="fail" in flags or "fail?" in flags,
            )
        )
    return nodes


def _as_it_is(response: Any, **options: Any) -> Any:
    return response


@dataclass
class FaultyCluster:
    """The failover cluster's nodes: their topology, and the faults a test brings on.

    Args:
        directory: ``CHATMEMORY_TEST_REDIS_FAILOVER_DIR`` (a directory per port, with ``redis.pid`` and ``command``).
    """

    directory: Path
    ports: tuple[int, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.ports = tuple(sorted(int(entry.name) for entry in self.directory.iterdir() if entry.name.isdigit()))

    def client(self, port: int) -> Redis:
        """A plain client of one node, answering ``CLUSTER NODES``, ``CLUSTER INFO`` and ``INFO`` as text.

        ``CLUSTER GETKEYSINSLOT`` replies the keys as they are (redis-py would decode them, mangling keys
        that are not UTF-8, as the LangChain4j store's history keys are).
        """
        client = Redis(host="127.0.0.1", port=port, socket_timeout=5, socket_connect_timeout=2)
        for command in ("CLUSTER NODES", "CLUSTER INFO", "INFO", "CLUSTER GETKEYSINSLOT"):
            client.set_response_callback(command, _as_it_is)
        return client

    def nodes(self) -> list[Node]:
        """The topology as a live node sees it."""
        for port in self.ports:
            text = self._cluster_nodes(port)
            if text is not None:
                return _parse_nodes(text)
        raise AssertionError(f"no node of the failover cluster answers on ports {self.ports}")

    def _cluster_nodes(self, port: int) -> str | None:
        try:
            with self.client(port) as client:
                return str(client.execute_command("CLUSTER NODES").decode())
        except Exception:  # a dead node: the caller asks the next
            return None

    def masters(self) -> list[Node]:
        return sorted(
            (node for node in self.nodes() if node.master and node.slots and not node.failed), key=lambda n: n.port
        )

    def owner(self, slot: int) -> Node:
        return next(node for node in self.masters() if node.owns(slot))

    def replica_of(self, master: Node) -> Node:
        return next(node for node in self.nodes() if node.master_id == master.node_id and not node.failed)

    # ---------------------------------------------------------------------------------- failover

    def kill(self, port: int) -> None:
        """SIGKILL the node on ``port`` (no shutdown, no save: what a crash does)."""
        pid = int((self.directory / str(port) / "redis.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.01)

    def take_over(self, replica_port: int) -> None:
        """Promote the replica on ``replica_port`` at once, without its master's agreement (it is dead)."""
        with self.client(replica_port) as client:
            client.execute_command("CLUSTER FAILOVER TAKEOVER")
            deadline = time.monotonic() + 10
            while b"role:master" not in client.execute_command("INFO", "replication"):
                if time.monotonic() > deadline:
                    raise AssertionError(f"the replica on {replica_port} did not become a master")
                time.sleep(0.02)

    def restart(self, port: int) -> None:
        """Start the node on ``port`` again as it was started (its nodes.conf makes it rejoin, as a replica)."""
        command = (self.directory / str(port) / "command").read_text().split("\n")
        subprocess.run([argument for argument in command if argument], check=True)

    def wait_healthy(self, timeout: float = HEALTHY_WITHIN) -> None:
        """Wait until every node says ``cluster_state:ok`` and each of 3 masters has a replica in sync."""
        deadline = time.monotonic() + timeout
        problem = ""
        while time.monotonic() < deadline:
            problem = self._problem()
            if not problem:
                return
            time.sleep(0.1)
        raise AssertionError(f"the failover cluster did not recover in {timeout:.0f} s: {problem}")

    def _problem(self) -> str:
        try:
            for port in self.ports:
                with self.client(port) as client:
                    if b"cluster_state:ok" not in client.execute_command("CLUSTER INFO"):
                        return f"node {port} is not ok"
                    info = client.execute_command("INFO", "replication")
                    if b"role:slave" in info and b"master_link_status:up" not in info:
                        return f"replica {port} is not in sync"
            nodes = self.nodes()
        except Exception as exc:
            return repr(exc)
        masters = [node for node in nodes if node.master and node.slots]
        if len(masters) != 3 or any(node.failed for node in nodes):
            return f"{len(masters)} masters, failed: {[node.port for node in nodes if node.failed]}"
        for master in masters:
            if not any(node.master_id == master.node_id for node in nodes):
                return f"master {master.port} has no replica"
        return ""

    def fail_over(self, master: Node) -> tuple[int, int]:
        """SIGKILL ``master`` and promote its replica; the (killed, promoted) ports."""
        replica = self.replica_of(master)
        self.kill(master.port)
        self.take_over(replica.port)
        return master.port, replica.port

    # --------------------------------------------------------------------------------- resharding

    def move_slots(self, slots: Iterable[int], to: Node, batch: int = 10, pause: float = 0.0) -> None:
        """Move each of ``slots`` to ``to`` live, as ``redis-cli --cluster reshard`` does.

        ``SETSLOT IMPORTING`` on the target, ``MIGRATING`` on the source, ``MIGRATE ... KEYS`` of the slot's
        keys ``batch`` at a time, then ``SETSLOT NODE`` on the target, the source and every other master.
        ``batch=1`` with a ``pause`` after each step holds a memory's keys split between the two nodes for
        a while, so its scripts meet ``TRYAGAIN`` as well as ``ASK``.
        """
        for slot in sorted(set(slots)):
            source = self.owner(slot)
            if source.node_id == to.node_id:
                continue
            with self.client(to.port) as target, self.client(source.port) as origin:
                target.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", source.node_id)
                origin.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", to.node_id)
                time.sleep(pause)
                while keys := origin.execute_command("CLUSTER GETKEYSINSLOT", slot, batch):
                    origin.execute_command("MIGRATE", "127.0.0.1", to.port, "", 0, 5000, "KEYS", *keys)
                    time.sleep(pause)
                target.execute_command("CLUSTER SETSLOT", slot, "NODE", to.node_id)
                origin.execute_command("CLUSTER SETSLOT", slot, "NODE", to.node_id)
            for master in self.masters():
                if master.node_id not in (to.node_id, source.node_id):
                    with self.client(master.port) as other:
                        other.execute_command("CLUSTER SETSLOT", slot, "NODE", to.node_id)

    def refusals(self) -> Counter[str]:
        """The error replies (``MOVED``, ``ASK``, ``TRYAGAIN`` ...) the masters gave so far (``INFO errorstats``)."""
        counts: Counter[str] = Counter()
        for master in self.masters():
            with self.client(master.port) as client:
                for line in client.execute_command("INFO", "errorstats").decode().splitlines():
                    name, _, rest = line.partition(":count=")
                    if name.startswith("errorstat_") and rest:
                        counts[name.removeprefix("errorstat_")] += int(rest)
        return counts

    def nodes_holding(self, key: bytes) -> list[int]:
        """The ports of the masters that hold ``key`` (one, or none; two would split a memory)."""
        holding = []
        slot = slot_of(key)
        for master in self.masters():
            with self.client(master.port) as client:  # what the node holds, whoever owns the slot
                held = client.execute_command("CLUSTER GETKEYSINSLOT", slot, 1000)
                if key in held:
                    holding.append(master.port)
        return holding


def slot_of(key: bytes) -> int:
    return int(key_slot(key))


def memories_by_master(cluster: FaultyCluster, meta_key_of: Any, per_master: int) -> dict[int, list[str]]:
    """``per_master`` memory ids whose slot each master owns (ids ``m0``, ``m1``, ... tried in order)."""
    owners = {node.port: node for node in cluster.masters()}
    chosen: dict[int, list[str]] = {port: [] for port in owners}
    index = 0
    while any(len(ids) < per_master for ids in chosen.values()):
        memory_id = f"m{index}"
        index += 1
        slot = slot_of(meta_key_of(memory_id))
        port = next(port for port, node in owners.items() if node.owns(slot))
        if len(chosen[port]) < per_master:
            chosen[port].append(memory_id)
    return chosen


# ---------------------------------------------------------------------------------- the workload


def turn(tag: str) -> tuple[AiMessage, ToolExecutionResultMessage]:
    """One add: a tool call and its result, which a window may only keep or drop together."""
    call = ToolExecutionRequest(id=f"call-{tag}", name="lookup", arguments=f'{{"q": "{tag}"}}')
    return AiMessage(tool_execution_requests=[call]), ToolExecutionResultMessage(
        id=f"call-{tag}", tool_name="lookup", text=tag, is_error=False
    )


@dataclass
class Ledger:
    """What each writer was told about its adds: acknowledged, or which error (by type), and when."""

    acknowledged: dict[str, list[str]] = field(default_factory=dict)
    """Memory id -> tags whose add returned."""
    errors: Counter[str] = field(default_factory=Counter)
    not_store_errors: list[str] = field(default_factory=list)
    failed_at: list[float] = field(default_factory=list)
    """Monotonic times of failed adds."""
    samples: dict[str, str] = field(default_factory=dict)
    """The first message of each error type."""
    latencies: list[float] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, memory_id: str, tag: str, started: float, error: BaseException | None) -> None:
        ended = time.monotonic()
        with self.lock:
            if error is None:
                self.acknowledged.setdefault(memory_id, []).append(tag)
                self.latencies.append(ended - started)
                return
            self.errors[type(error).__name__] += 1
            self.samples.setdefault(type(error).__name__, f"{error} <- {error.__cause__!r}")
            self.failed_at.append(ended)
            if not isinstance(error, StoreError):
                self.not_store_errors.append(repr(error))

    def merge(self, other: dict[str, Any]) -> None:
        """Add what a writer process sent back (:meth:`export`)."""
        with self.lock:
            for memory_id, tags in other["acknowledged"].items():
                self.acknowledged.setdefault(memory_id, []).extend(tags)
            self.errors.update(other["errors"])
            self.not_store_errors.extend(other["not_store_errors"])
            self.failed_at.extend(other["failed_at"])
            self.latencies.extend(other["latencies"])

    def export(self) -> dict[str, Any]:
        return {
            "acknowledged": self.acknowledged,
            "errors": dict(self.errors),
            "not_store_errors": self.not_store_errors,
            "failed_at": self.failed_at,
            "latencies": self.latencies,
        }

    @property
    def acknowledged_count(self) -> int:
        return sum(map(len, self.acknowledged.values()))


def plan_of_writer(writer: int, memories: Sequence[str], adds: int) -> list[tuple[str, str]]:
    """(memory id, tag) of each add of ``writer``: round the memories, starting at its own offset."""
    return [(memories[(writer + index) % len(memories)], f"w{writer}-{index}") for index in range(adds)]


@dataclass
class Findings:
    """What the memories hold against the ledger."""

    acknowledged: int
    present: int
    lost: list[str]
    doubled: list[str]
    broken_windows: list[str]
    errors: dict[str, int]
    not_store_errors: list[str]


def broken(window: Sequence[ChatMessage]) -> bool:
    """Whether a tool result in ``window`` has no call before it (an orphan), or a call no result after it."""
    called: set[str | None] = set()
    for message in window:
        if isinstance(message, AiMessage):
            called.update(request.id for request in message.tool_execution_requests)
        elif isinstance(message, ToolExecutionResultMessage) and message.id not in called:
            return True
    answered = {message.id for message in window if isinstance(message, ToolExecutionResultMessage)}
    return not called <= answered


def check(ledger: Ledger, histories: dict[str, list[ChatMessage]], windows: dict[str, list[ChatMessage]]) -> Findings:
    """Compare the ledger with each memory's history (every message ever added) and its window."""
    lost: list[str] = []
    doubled: list[str] = []
    windows_broken: list[str] = []
    present = 0
    for memory_id, history in histories.items():
        results = Counter(message.text for message in history if isinstance(message, ToolExecutionResultMessage))
        in_window = Counter(
            message.text for message in windows[memory_id] if isinstance(message, ToolExecutionResultMessage)
        )
        doubled.extend(
            f"{memory_id}:{tag}"
            for tag, count in (results + in_window).items()
            if results[tag] > 1 or in_window[tag] > 1
        )
        for tag in ledger.acknowledged.get(memory_id, []):
            if results[tag]:
                present += 1
            else:
                lost.append(f"{memory_id}:{tag}")
        if broken(windows[memory_id]):
            windows_broken.append(memory_id)
    return Findings(
        acknowledged=ledger.acknowledged_count,
        present=present,
        lost=lost,
        doubled=doubled,
        broken_windows=windows_broken,
        errors=dict(ledger.errors),
        not_store_errors=ledger.not_store_errors,
    )


__all__ = [
    "FAILOVER_EXAMPLE",
    "FaultyCluster",
    "Findings",
    "Ledger",
    "Node",
    "broken",
    "check",
    "memories_by_master",
    "plan_of_writer",
    "slot_of",
    "turn",
]
