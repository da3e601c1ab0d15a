"""The engine service's requests (`RequestQueue`): each client kind's line of waiting requests, served
round-robin, the running requests by id (in the order they started), and each request's record until it
is done. Plain bookkeeping with no lock of its own: the service calls it with its lock held."""

from __future__ import annotations

import itertools
import time
from collections import deque
from typing import TYPE_CHECKING

from ember_chat.engine.inference.service.requests import ExclusiveJob, GenerationRequest, QueueState, RequestRecord

if TYPE_CHECKING:
    from ember_chat.engine.inference.service.runs import Run

UNBOUNDED_CLIENTS = frozenset({"window"})  # client kinds `submit` never refuses (except at shutdown)


class RequestQueue:
    def __init__(self) -> None:
        self._lines: dict[str, deque[GenerationRequest]] = {}
        self._served: dict[str, int] = {}  # client kind → when it was last served
        self._serve_clock = itertools.count()
        self.active: dict[int, Run] = {}  # the running requests by id, in the order they started
        self.records: dict[int, RequestRecord] = {}

    def count(self) -> int:
        """How many requests wait."""
        return sum(len(line) for line in self._lines.values())

    def state(self, exclusive: ExclusiveJob | None) -> QueueState:
        """What runs (`exclusive`, the job running, if any, else the active requests) and what waits."""
        running = tuple(self.records[i] for i in self.active if i in self.records)
        job = exclusive
        if job is not None:
            running = (RequestRecord(job.id, job.client, job.label, "running", t_submitted=job.t_submitted),)
        queued = tuple(self.records[r.id] for line in self._lines.values() for r in line)
        return QueueState(running[0] if running else None, queued, running)

    def add(self, request: GenerationRequest) -> None:
        """Queue a request (its id already given) at the end of its client kind's line."""
        line = self._lines.setdefault(request.client, deque())
        line.append(request)
        self.records[request.id] = RequestRecord(
            request.id, request.client, request.label, "queued", t_submitted=time.time()
        )

    def drop(self, request_id: int) -> GenerationRequest | None:
        """Take a waiting request out of its line (None: none waits with that id)."""
        for line in self._lines.values():
            for req in line:
                if req.id == request_id:
                    line.remove(req)
                    return req
        return None

    def ids(self) -> list[int]:
        """Every waiting request's id, then every running one's."""
        ids = [r.id for line in self._lines.values() for r in line]
        ids.extend(self.active)
        return ids

    def heads(self) -> list[GenerationRequest]:
        """The first request waiting in each line."""
        return [line[0] for line in self._lines.values() if line]

    def next(self, window_only: bool = False) -> GenerationRequest | None:
        """Round-robin between client kinds: the kind served longest ago goes first (ties: the
        earliest request), so neither the window nor a burst of API calls can starve the other.
        `window_only`: only a request of a client that is never refused (the window's slot)."""
        waiting = [
            (self._served.get(client, -1), line[0].id, client)
            for client, line in self._lines.items()
            if line and (not window_only or client in UNBOUNDED_CLIENTS)
        ]
        if not waiting:
            return None
        _, _, client = min(waiting)
        self._served[client] = next(self._serve_clock)
        return self._lines[client].popleft()

    def start(self, run: Run) -> None:
        """The run's request is running."""
        req = run.req
        self.active[req.id] = run
        t_submitted = self.records[req.id].t_submitted
        self.records[req.id] = RequestRecord(req.id, req.client, req.label, "running", t_submitted=t_submitted)

    def running_bounded(self) -> int:
        """How many running requests come from client kinds that can be refused (not the window)."""
        return sum(1 for run in self.active.values() if run.req.client not in UNBOUNDED_CLIENTS)

    def retire(self) -> bool:
        """Runs that have ended leave the running set; False when none had."""
        ended = [rid for rid, run in self.active.items() if run.ended]
        for rid in ended:
            del self.active[rid]
        return bool(ended)
