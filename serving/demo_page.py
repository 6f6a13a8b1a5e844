"""ds2-demo's HTTP side: the page's files, which origins may open its WebSocket, and the headers every answer carries.

The page (`web/`: index.html, app.js, the AudioWorklet pcm-worklet.js, style.css) is served from the same port as
the WebSocket at `/ws`, and `/healthz` answers "ok". Two of the demo's limits (docs/streaming.md, "Web demo
limits") are here:

- **Origin.** A browser names the page that opens a WebSocket in its `Origin` header, and any page the user visits
  may try `ws://127.0.0.1:8000/ws`. Only the page's own origin is let through: `Origin` must be `http(s)://` plus
  the `Host` the browser asked for, and that host an IP address, `localhost` or the `host` the demo binds (a domain
  name could be DNS-rebound to this machine: list it in `allowed_origins`). Other origins get HTTP 403 with a
  one-line reason. A handshake without `Origin` is let through: browsers always send one, so no web page can
  make it; it comes from a program (ds2-demo-client, a script) that could open the socket anyway.
- **Headers.** Every HTTP answer carries `Content-Security-Policy` (the page's own scripts, styles and WebSocket
  only, and no framing: `frame-ancestors 'none'`), `X-Content-Type-Options: nosniff`, `X-Frame-Options: DENY` and
  `Referrer-Policy: no-referrer`.
"""

from __future__ import annotations

import ipaddress
import logging
import mimetypes
import re
import urllib.parse
from pathlib import Path

logger = logging.getLogger(__name__)

WEB_DIR = Path(__file__).parent / "web"  # the page, its script and the AudioWorklet
PAGES = {"/": "index.html", "/index.html": "index.html", "/app.js": "app.js", "/pcm-worklet.js": "pcm-worklet.js",
         "/style.css": "style.css"}
WEBSOCKET_PATH = "/ws"
DEFAULT_PORTS = {"http": 80, "https": 443}  # an origin's port when it names none
# What every HTTP answer carries. The page loads its own script, worklet and style sheet, plays a file the user
# chose (a blob: URL) and opens its WebSocket (connect-src, with the Host it was asked under); nothing else, and no
# other page may frame it.
SECURITY_HEADERS = (("X-Content-Type-Options", "nosniff"), ("X-Frame-Options", "DENY"),
                    ("Referrer-Policy", "no-referrer"))
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
                           "media-src 'self' blob:; connect-src 'self' {sockets}; base-uri 'none'; form-action 'none'; "
                           "frame-ancestors 'none'")
HOST_PORT = re.compile(r"[A-Za-z0-9.-]+(:[0-9]+)?|\[[0-9A-Fa-f:.]+\](:[0-9]+)?")  # a Host header fit to quote


def normalize_origin(origin: str) -> str | None:
    """`origin` as `scheme://host:port` (lowercase, the port explicit), or None if it is not an http(s) origin."""
    try:
        url = urllib.parse.urlsplit(origin.strip())
        port = url.port
    except (ValueError, AttributeError):
        return None
    if (url.scheme not in DEFAULT_PORTS or not url.hostname or url.path not in ("", "/") or url.query or url.fragment
            or url.username is not None):
        return None
    host = f"[{url.hostname}]" if ":" in url.hostname else url.hostname
    return f"{url.scheme}://{host}:{port or DEFAULT_PORTS[url.scheme]}"


def process_request(connection, request, *, allowed_origins: tuple[str, ...], host: str):
    """websockets' `process_request`: serve the page's files; let `/ws` through to the WebSocket handshake when
    `origin_refusal` lets it (`allowed_origins`: `DemoConfig`'s, normalized; `host`: the address the demo binds)."""
    from websockets.datastructures import Headers
    from websockets.http11 import Response

    path = request.path.split("?", 1)[0]
    if path == WEBSOCKET_PATH:
        refusal = origin_refusal(request.headers, allowed_origins, host)
        if refusal:
            logger.warning("refused a WebSocket from %s: %s", connection.remote_address[0], refusal)
            return connection.respond(403, f"{refusal}\n")
        return None
    if path == "/healthz":
        return connection.respond(200, "ok\n")
    name = PAGES.get(path)
    if name is None:
        return connection.respond(404, f"not found: {path[:200]}\n")
    body = (WEB_DIR / name).read_bytes()
    kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
    if kind.startswith("text/") or kind.endswith("javascript"):
        kind += "; charset=utf-8"
    headers = Headers([("Content-Type", kind), ("Content-Length", str(len(body))), ("Cache-Control", "no-store")])
    return Response(200, "OK", headers, body)


def process_response(connection, request, response):
    """websockets' `process_response`: every HTTP answer (the page's files, refusals, the handshake's) with
    `SECURITY_HEADERS` and the Content-Security-Policy (its WebSocket under the `Host` asked for, when that is a plain
    host[:port])."""
    host = request.headers.get("Host", "")
    sockets = f"ws://{host} wss://{host}" if HOST_PORT.fullmatch(host) else ""
    for header, value in SECURITY_HEADERS + (("Content-Security-Policy",
                                              CONTENT_SECURITY_POLICY.format(sockets=sockets)),):
        response.headers[header] = value
    return response


def origin_refusal(headers, allowed_origins: tuple[str, ...], host: str) -> str:
    """Why a WebSocket handshake with these HTTP headers is refused, in one line; "" if it is not.

    Let through: no `Origin` (not a browser), the page's own origin (`http(s)://` + the `Host` asked for, a
    host that can't be DNS-rebound: an IP address, `localhost` or the bound `host`), and `allowed_origins`.
    """
    origins = headers.get_all("Origin")
    if not origins:
        return ""
    if len(origins) > 1:
        return f"{len(origins)} Origin headers; a browser sends one"
    origin = normalize_origin(origins[0])
    if origin is not None and (origin in allowed_origins or _own_origin(origin, headers, host)):
        return ""
    return (f"origin {origins[0][:200]!r} may not open this WebSocket: only the demo page's own origin and "
            "--allowed_origins may")


def _own_origin(origin: str, headers, bound_host: str) -> bool:
    hosts = headers.get_all("Host")
    if len(hosts) != 1:
        return False
    url = urllib.parse.urlsplit(origin)
    try:
        host = urllib.parse.urlsplit(f"//{hosts[0]}")
        port = host.port or DEFAULT_PORTS[url.scheme]  # behind a TLS proxy the page is https, the Host the same
    except ValueError:
        return False
    if (host.hostname, port) != (url.hostname, url.port):
        return False
    try:
        ipaddress.ip_address(host.hostname)
        return True  # an address: the browser reached this server (or a proxy to it) there
    except ValueError:  # a name: one an attacker's DNS may point here, unless it is one of ours
        return host.hostname in ("localhost", bound_host.lower())


__all__ = ["CONTENT_SECURITY_POLICY", "PAGES", "SECURITY_HEADERS", "WEBSOCKET_PATH", "WEB_DIR", "normalize_origin",
           "origin_refusal", "process_request", "process_response"]
