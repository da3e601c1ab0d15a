"""The pool's catalog of remote models: every model of every configured connection (Models ▸
Connections, `ember-chat remote add`), named as the window names them — `remote:<connection>/<model id>`
— each served through a remote engine (a `RemoteModelRef`: no memory of this machine).

A request must not wait on the network for another server's list, so each connection's `GET /models`
is asked at most every `refresh_s` seconds, on a thread of its own, with a short connect timeout; until
a fresh list comes the last one is used. Only a connection never listed yet is waited for, and for at
most the connect timeout from when its listing began. A connection that does not answer contributes
nothing (said once to `said`, until it answers again), never an error for a request to another model.

`lookup(name)` takes any `remote:<connection>/<model id>` of a configured connection, listed or not (a
list may be stale: a model added on the server since); the remote engine's load checks the server
serves it. The API key is read from the keychain by the connection store, never written or said."""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ember_chat.engine.core.refs import Endpoint, ModelRef, RemoteModelRef
from ember_chat.engine.errors import EmberError
from ember_chat.engine.inference.remote.wire import check_connection
from ember_chat.engine.storage.connections import (
    Connection,
    ConnectionStore,
    parse_remote_model_name,
    remote_model_name,
)

REFRESH_S = 60.0  # how old a connection's list may be before it is asked again
CONNECT_TIMEOUT_S = 2.0  # a server that takes longer to accept a connection is taken as down
LIST_TIMEOUT_S = 10.0  # the most a listing waits for the server's answer (on its own thread)


def list_models(endpoint: Endpoint, own_server_id: str | None = None) -> list[str]:
    """The ids of the models `endpoint`'s server lists (RemoteError, an EmberError, when it does not answer;
    RemoteSelfConnection when it is the API server of the engine `own_server_id`)."""
    return [m.id for m in check_connection(endpoint, own_server_id).models]


@dataclass
class _Listing:
    """One connection's last list (under the catalog's lock)."""

    connection: Connection
    started: float  # time.monotonic() when the listing under way began (what a request may wait for)
    done: threading.Event = field(default_factory=threading.Event)
    refs: dict[str, ModelRef] | None = None  # None: never listed yet, or the connection changed since
    listed_at: float | None = None
    running: bool = True
    down: bool = False  # the last listing failed (said once until it answers again)


class RemoteCatalog:
    def __init__(
        self,
        store: ConnectionStore,
        refresh_s: float = REFRESH_S,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
        said: Callable[[str], None] | None = None,
        lister: Callable[[Endpoint, str | None], list[str]] = list_models,
        clock: Callable[[], float] = time.monotonic,
        own_server_id: str | None = None,
    ) -> None:
        """`said`: told, in a sentence for serve's log, when a connection stops or starts answering.
        `lister`: a server's model ids (the network). `clock`: the time the refresh counts in (tests
        give theirs; what a request waits is real time). `own_server_id`: the serving engine's (a
        connection back to this very server lists nothing: its models would be listed again, nested)."""
        self._store = store
        self.refresh_s = refresh_s
        self.connect_timeout_s = connect_timeout_s
        self._said = said
        self._lister = lister
        self._clock = clock
        self._own_server_id = own_server_id
        self._lock = threading.Lock()
        self._listings: dict[str, _Listing] = {}

    def __call__(self) -> dict[str, ModelRef]:
        """Every listed remote model by its name; waits only for connections never listed yet, and at
        most the connect timeout."""
        connections = self._store.list()
        now = self._clock()
        waits: list[_Listing] = []
        with self._lock:
            for gone in set(self._listings) - {c.name for c in connections}:
                del self._listings[gone]
            for connection in connections:
                listing = self._listings.get(connection.name)
                if listing is None or listing.connection != connection:  # new, or edited since
                    listing = self._listings[connection.name] = _Listing(connection, time.monotonic())
                    self._start(listing)
                elif not listing.running and (listing.listed_at is None or now - listing.listed_at >= self.refresh_s):
                    listing.running, listing.started, listing.done = True, time.monotonic(), threading.Event()
                    self._start(listing)
                if listing.refs is None and listing.running:
                    waits.append(listing)
        for listing in waits:
            left = listing.started + self.connect_timeout_s - time.monotonic()
            if left > 0:
                listing.done.wait(left)
        names: dict[str, ModelRef] = {}
        with self._lock:
            for connection in connections:
                listing = self._listings.get(connection.name)
                if listing is not None and listing.refs:
                    names.update(listing.refs)
        return names

    def lookup(self, name: str) -> ModelRef | None:
        """`remote:<connection>/<model id>` of a configured connection, whether its list says it or not."""
        parsed = parse_remote_model_name(name)
        if parsed is None:
            return None
        connection, model_id = parsed
        try:
            return self._store.model_ref(connection, model_id)
        except EmberError:  # (no such connection: the pool answers with the names that exist)
            return None

    def _start(self, listing: _Listing) -> None:
        threading.Thread(target=self._list, args=(listing,), name="ember-remote-list", daemon=True).start()

    def _list(self, listing: _Listing) -> None:
        connection = listing.connection
        refs: dict[str, ModelRef] | None = None
        problem = ""
        try:
            endpoint = self._store.endpoint(connection.name)  # (the key, from the keychain)
            asked = dataclasses.replace(endpoint, connect_timeout_s=self.connect_timeout_s,
                                        read_timeout_s=min(endpoint.read_timeout_s, LIST_TIMEOUT_S))  # fmt: skip
            ids = self._lister(asked, self._own_server_id)
            refs = {remote_model_name(connection.name, i): RemoteModelRef(endpoint, i) for i in ids}
        except EmberError as exc:
            problem = str(exc)
        except Exception as exc:  # (a thread of its own: nothing else would say it)
            problem = f"{type(exc).__name__}: {exc}"
        with self._lock:
            current = self._listings.get(connection.name) is listing
            listing.running = False
            listing.listed_at = self._clock()
            was_down, listing.down = listing.down, refs is None
            # a connection that does not answer contributes nothing (not its last list: those models are not there now)
            listing.refs = refs if refs is not None else {}
        listing.done.set()
        if not current:
            return
        if refs is None and not was_down:
            self._say(f"the connection {connection.name} ({connection.base_url}) did not answer, so its models are "
                      f"not listed until it does: {problem}")  # fmt: skip
        elif refs is not None and was_down:
            self._say(f"the connection {connection.name} answers again ({len(refs)} models)")

    def _say(self, what: str) -> None:
        if self._said is not None:
            self._said(what)
