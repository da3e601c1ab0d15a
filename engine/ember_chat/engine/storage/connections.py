"""Named connections to remote OpenAI-compatible servers: saved atomically as JSON in the config dir
(name, base URL, default model, certificate checks, read timeout); the API key of each lives only in
the OS keychain."""

from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ember_chat.engine.core.refs import Endpoint, RemoteModelRef
from ember_chat.engine.errors import ConnectionNotFound, EmberError, InvalidParameter
from ember_chat.engine.storage.atomic import ProblemLog, read_json_file, write_json_atomically
from ember_chat.engine.storage.secrets import SecretStore

REMOTE_PREFIX = "remote:"  # model names in the picker: remote:<connection>/<model id>


def normalize_base_url(url: str) -> str:
    """http(s)://host[:port][/path]; a bare host gets the usual /v1."""
    url = url.strip()
    if "://" not in url:
        url = "http://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidParameter(f"{url!r} is not an http(s) address, e.g. http://127.0.0.1:8000/v1.")
    if parts.username or parts.password:
        raise InvalidParameter("Put the API key in the API key field, not in the address.")
    path = parts.path.rstrip("/") or "/v1"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


@dataclass(frozen=True)
class Connection:
    name: str
    base_url: str
    default_model: str = ""
    verify_tls: bool = True
    read_timeout_s: float = 60.0
    models: tuple[str, ...] = ()  # the server's models when it was last reached (for the picker)

    def __post_init__(self) -> None:
        for field_name in ("name", "base_url", "default_model"):
            if not isinstance(getattr(self, field_name), str):
                raise InvalidParameter(f"{field_name} must be text, got {getattr(self, field_name)!r}.")
        if not isinstance(self.verify_tls, bool):
            raise InvalidParameter(f"verify_tls must be true or false, got {self.verify_tls!r}.")
        if not isinstance(self.models, list | tuple) or not all(isinstance(m, str) for m in self.models):
            raise InvalidParameter(f"models must be a list of model ids, got {self.models!r}.")
        object.__setattr__(self, "models", tuple(self.models))
        name = self.name.strip()
        if not name or len(name) > 64 or "/" in name:
            raise InvalidParameter("A connection name must be 1–64 characters without '/'.")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "base_url", normalize_base_url(self.base_url))
        timeout = self.read_timeout_s
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 1 <= timeout <= 3600:
            raise InvalidParameter("The read timeout must be between 1 and 3600 seconds.")
        object.__setattr__(self, "read_timeout_s", float(timeout))

    @property
    def secret_key(self) -> str:
        return secret_key(self.name)


def secret_key(connection: str) -> str:
    """The connection's API key entry in the OS keychain."""
    return f"connection:{connection}"


def remote_model_name(connection: str, model_id: str) -> str:
    return f"{REMOTE_PREFIX}{connection}/{model_id}"


def parse_remote_model_name(name: str) -> tuple[str, str] | None:
    """(connection, model id) for a picker name made by `remote_model_name`, else None."""
    if not name.startswith(REMOTE_PREFIX):
        return None
    connection, _, model_id = name[len(REMOTE_PREFIX) :].partition("/")
    return (connection, model_id) if connection and model_id else None


class ConnectionStore(ProblemLog):
    """connections.json: {"connections": [...]}, read afresh each time (the command line may have
    changed it). A damaged file is set aside, never overwritten. An invalid entry is left out of the
    list and reported, and kept in the file as it is (saves write it back) for the user to fix; keys
    of the file Ember does not know are kept too. `take_problems` says what was wrong, in words."""

    def __init__(self, path: Path, secrets: SecretStore | None = None) -> None:
        super().__init__()
        self.path = Path(path)
        self.secrets = secrets or SecretStore()

    def _read(self) -> tuple[list[Connection], list[Any], dict[str, Any]] | None:
        """(valid connections, invalid entries as the file holds them, the file's other keys); None
        when there is no usable file."""
        data = read_json_file(
            self.path, self, "connections file", "connections",
            "Ember starts without saved connections; their API keys are still in the keychain.",
            fits=lambda d: isinstance(d, dict) and isinstance(d.get("connections", []), list),
        )  # fmt: skip
        if data is None:
            return None
        valid, invalid = [], []
        for number, item in enumerate(data.get("connections", []), 1):
            try:
                valid.append(_connection_from(item))
            except InvalidParameter as exc:
                invalid.append(item)
                name = item.get("name") if isinstance(item, dict) else None
                which = repr(name) if isinstance(name, str) and name else f"number {number}"
                self.report(
                    f"Connection {which} in {self.path} is not valid: {exc} It is left out of the list and kept "
                    "in the file as it is, to be fixed there."
                )
        return valid, invalid, {k: v for k, v in data.items() if k != "connections"}

    def list(self) -> list[Connection]:
        read = self._read()
        return read[0] if read else []

    def take_problems(self) -> list[str]:
        """What is wrong with the file (read now, every entry checked), each said once."""
        self._read()
        return super().take_problems()

    def get(self, name: str) -> Connection:
        for c in self.list():
            if c.name == name:
                return c
        raise ConnectionNotFound(f"There is no connection called {name!r}. Add it with Models ▸ Connections.")

    def has_key(self, name: str) -> bool:
        return self.secrets.get(secret_key(name)) is not None

    def save(self, connection: Connection, api_key: str | None = None, replaces: str | None = None) -> None:
        """Add or update. `api_key`: None keeps the stored key, "" removes it. `replaces`: the old
        name when a connection is renamed (its key moves with it)."""
        existing = [c for c in self.list() if c.name not in (connection.name, replaces)]
        if replaces and replaces != connection.name:
            # read (not get): a keychain that cannot be read must stop the rename, not lose the key
            old_key = self.secrets.read(secret_key(replaces), "The connection's API key")
            if old_key and api_key is None:
                api_key = old_key
        if api_key is not None:
            self.secrets.set(connection.secret_key, api_key, "The API key")
        self._write([*existing, connection])
        if replaces and replaces != connection.name:
            self.secrets.clear(secret_key(replaces))  # only once the key is stored under the new name

    def remove(self, name: str) -> None:
        self.get(name)
        self._write([c for c in self.list() if c.name != name])
        self.secrets.clear(secret_key(name))

    def endpoint(self, name: str) -> Endpoint:
        c = self.get(name)
        return Endpoint(
            name=c.name,
            base_url=c.base_url,
            api_key=self.secrets.get(c.secret_key),
            verify_tls=c.verify_tls,
            read_timeout_s=c.read_timeout_s,
        )

    def model_ref(self, name: str, model_id: str | None = None) -> RemoteModelRef:
        c = self.get(name)
        model = model_id or c.default_model
        if not model:
            raise InvalidParameter(f"Say which model of {name!r} to use (the connection has no default model).")
        return RemoteModelRef(self.endpoint(name), model)

    def _write(self, connections: list[Connection]) -> None:
        """These connections, then the file's invalid entries and other keys as they were."""
        read = self._read()
        if read is None and self.path.exists():  # damaged, and it could not be moved aside
            raise EmberError(
                f"The connections were not saved: {self.path} is damaged and could not be moved aside, so it "
                "was not overwritten. Move or delete that file, then try again."
            )
        _, invalid, other = read or ([], [], {})
        ordered = [asdict(c) for c in sorted(connections, key=lambda c: c.name.lower())]
        write_json_atomically(self.path, {**other, "connections": ordered + invalid})


def _connection_from(item: object) -> Connection:
    """A connection as connections.json holds it; InvalidParameter says what is wrong."""
    if not isinstance(item, dict):
        raise InvalidParameter(f"it is {json.dumps(item)}, not a set of named values.")
    missing = [f.name for f in fields(Connection) if f.default is MISSING and f.name not in item]
    if missing:
        raise InvalidParameter(f"it has no {' or '.join(missing)}.")
    return Connection(**{f.name: item[f.name] for f in fields(Connection) if f.name in item})
