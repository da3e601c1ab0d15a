"""The HTTP conversation with the Hub and the servers it redirects to (its CDN).

- One client (`hub_http_client`) for the Hub, its CDN and the online check, honouring proxies from the
  environment (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY; the system settings on Windows and
  macOS), as `huggingface_hub` does for search and metadata.
- Redirects are followed by hand (`send_following_redirects`) so the headers, and with them the
  token, are decided again for each URL: the token never reaches a redirect target.
- Each HTTP status becomes a typed error with a clear sentence, or a `Transient` fault to retry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING
from urllib.parse import urljoin

from ember_chat.engine.errors import DownloadError, HubAuthError, HubNotFound

if TYPE_CHECKING:  # the HTTP stack is imported by the first transfer, not when the window starts
    import httpx2

REDIRECTS = (301, 302, 303, 307, 308)


def hub_http_client(timeout: float) -> httpx2.Client:
    """The HTTP client for the Hub, the servers it redirects to, and the online check.

    `trust_env`: proxies from the environment (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY) and
    SSL_CERT_FILE/SSL_CERT_DIR apply, so a machine behind a proxy can reach the Hub. Redirects are
    not followed by the client: `send_following_redirects` follows them and decides the token per origin.
    Bodies are never decoded (`Accept-Encoding: identity`): Range offsets are file offsets.
    """
    import httpx2

    return httpx2.Client(
        trust_env=True,
        follow_redirects=False,
        timeout=httpx2.Timeout(timeout),
        headers={"User-Agent": "ember-chat", "Accept-Encoding": "identity"},
    )


class Transient(Exception):
    """A fault worth another try (HTTP 429 or 5xx, a body cut short, a resume at the wrong offset)."""


def send_following_redirects(
    client: httpx2.Client, method: str, url: str, headers_for: Callable[[str], dict[str, str]]
) -> httpx2.Response:
    """A streamed response; redirects are followed by hand so the headers (the token) are recomputed
    for each origin by `headers_for(url)` (it never reaches the CDN). The caller closes the response."""
    for _ in range(6):
        resp = client.send(client.build_request(method, url, headers=headers_for(url)), stream=True)
        location = resp.headers.get("Location")
        if resp.status_code in REDIRECTS and location:
            resp.close()
            url = urljoin(url, location)
            continue
        return resp
    raise DownloadError(f"too many redirects for {url}")


def raise_for_status(resp: httpx2.Response, repo_id: str, filename: str) -> None:
    """A typed error for a failed answer about `repo_id`/`filename`; `Transient` for 429 and 5xx.
    A 416 (range not satisfiable) is the caller's to judge."""
    status = resp.status_code
    if status < 400 or status == 416:
        return
    code = resp.headers.get("X-Error-Code") or ""
    what = f"{repo_id}/{filename}"
    if code == "GatedRepo" or status in (401, 403):
        raise HubAuthError(
            f"{what}: access denied ({status}{', gated repository' if code == 'GatedRepo' else ''}). "
            "Accept the licence on the Hub and add a Hugging Face token."
        )
    if status == 404:
        raise HubNotFound(f"{what}: not found on the Hub ({code or '404'}).")
    if status == 429 or status >= 500:
        raise Transient(f"HTTP {status}")
    raise DownloadError(f"{what}: the server answered HTTP {status}.")
