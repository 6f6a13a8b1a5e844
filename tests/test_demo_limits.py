"""ds2-demo's WebSocket limits, seen by raw clients (the websockets library, as any script would connect): only the
page's own origin (and `allowed_origins`) may open it, a connection that sends nothing is closed, and the busy
limit counts connections per client address. The page's side of these, in real Chromium: tests/test_demo_page.py.

Each test starts its own ds2-demo from one small untrained streaming export (the limits don't look at the
transcripts); a second client is a second loopback address (127.0.0.2: all of 127/8 is loopback on Linux).
"""

import dataclasses
import json
import time
import urllib.error
import urllib.request

import keras
import numpy as np
import pytest
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from deepspeech2.audio import save_wav, speech_like_clip
from deepspeech2.bundle import save_bundle
from deepspeech2.features import FeatureConfig
from deepspeech2.model import build_model
from deepspeech2.model_config import DS2_STREAMING
from deepspeech2.prepare.stats import compute_mean_std
from deepspeech2.vocab import Vocabulary
from deepspeech2_export.saved_model import ExportConfig, export_model
from deepspeech2_serving.demo import DemoConfig, start
from deepspeech2_serving.demo_client import DemoClientConfig, stream_file

from factories import make_manifest

CONFIG = dataclasses.replace(DS2_STREAMING, conv_filters=(4, 4), rnn_layers=1, rnn_units=16)
TIMEOUT = 30  # seconds any one answer may take on a busy 2-core machine (a limit, not a measurement)
IDLE_CLOSE_CODE = 4408  # the demo's own code (4000-4999, RFC 6455 §7.4.2), as HTTP 408
TRY_AGAIN_LATER = 1013  # the close code of a `busy` refusal (IANA: "try again later")
MESSAGE_TOO_BIG = 1009  # RFC 6455 §7.4.1


@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """The version folder of a small untrained ds2-streaming export."""
    d = tmp_path_factory.mktemp("demo-limits")
    manifest, _ = make_manifest(d, n=2)
    keras.utils.set_random_seed(0)
    bundle = save_bundle(d / "model", build_model(CONFIG), CONFIG, Vocabulary.english(),
                         compute_mean_std([manifest], FeatureConfig()))
    return export_model(ExportConfig(str(bundle), str(d / "export"), max_audio_seconds=4.0))


@pytest.fixture
def demo(export):
    """`demo(**config)`: a ds2-demo on 127.0.0.1 and a free port, stopped after the test."""
    running = []

    def make(**config):
        running.append(start(DemoConfig(str(export), port=0, **config)))
        return running[-1]

    yield make
    for r in running:
        r.stop()


def open_ws(port: int, host: str = "127.0.0.1", origin: str | None = None, client: str = "127.0.0.1"):
    """A WebSocket to the demo on 127.0.0.1:`port`, sending `Host: host:port` and `Origin: origin` (none if None),
    from the address `client`."""
    return connect(f"ws://{host}:{port}/ws", origin=origin, address=("127.0.0.1", port),
                   source_address=(client, 0), open_timeout=TIMEOUT, close_timeout=TIMEOUT)


def receive(ws) -> dict:
    return json.loads(ws.recv(timeout=TIMEOUT))


def refused(port: int, **kwargs) -> tuple[int, str]:
    """The HTTP status and body of a handshake the demo must refuse."""
    with pytest.raises(InvalidStatus) as e:
        open_ws(port, **kwargs).close()
    return e.value.response.status_code, e.value.response.body.decode()


def refused_with_headers(port: int, **kwargs):
    """The HTTP status and headers of a handshake the demo must refuse."""
    with pytest.raises(InvalidStatus) as e:
        open_ws(port, **kwargs).close()
    return e.value.response.status_code, e.value.response.headers


def test_a_streaming_export_streams_past_the_exports_limit_up_to_the_flags(demo):
    """`hello` names the mode; stream_step takes the audio in chunks, so the export's 4 s (per request) doesn't
    bound an utterance, `max_seconds` does (the offline mode's limits: tests/test_demo_offline.py)."""
    port = demo(max_seconds=6.0).port
    with open_ws(port) as ws:
        assert receive(ws) == {"type": "hello", "model": "ds2", "version": 1, "sample_rate": 16000,
                               "encoding": "pcm_s16le", "decoder": "greedy", "max_seconds": 6.0, "mode": "streaming",
                               "words": False}
        ws.send(json.dumps({"type": "start", "sample_rate": 16000, "encoding": "pcm_s16le"}))
        assert receive(ws)["type"] == "started"
        for _ in range(50):  # 5 s in 100 ms chunks
            ws.send(np.zeros(1600, "<i2").tobytes())
        ws.send(json.dumps({"type": "stop"}))
        while (message := receive(ws))["type"] == "partial":
            pass
        assert message["type"] == "final" and message["audio_seconds"] == 5.0
        ws.send(json.dumps({"type": "start", "sample_rate": 16000, "encoding": "pcm_s16le"}))
        assert receive(ws)["type"] == "started"
        ws.send(np.zeros(6 * 16000 + 1, "<i2").tobytes())
        while (message := receive(ws))["type"] == "partial":
            pass
        assert message["code"] == "too_long" and "6 s" in message["message"]


def test_other_origins_are_refused_with_403(demo):
    port = demo().port
    status, body = refused(port, origin="http://evil.example")  # a page elsewhere on the web
    assert status == 403 and "http://evil.example" in body and "--allowed_origins" in body
    assert body.count("\n") == 1  # one line
    for host, origin in (
            ("evil.example", f"http://evil.example:{port}"),  # DNS rebinding: evil.example resolved to 127.0.0.1
            ("127.0.0.1", "http://127.0.0.1:1"),  # another server on this machine is another origin
            ("127.0.0.1", "null"),  # a sandboxed frame or a file:// page
            ("localhost", f"http://127.0.0.1:{port}")):  # not the origin of the page that asked
        assert refused(port, host=host, origin=origin)[0] == 403, (host, origin)


def test_the_pages_own_origin_listed_origins_and_non_browser_clients_are_accepted(demo):
    port = demo(allowed_origins=("https://Friend.example/",)).port
    for host, origin in (("127.0.0.1", f"http://127.0.0.1:{port}"),  # the page as ds2-demo prints its URL
                         ("localhost", f"http://localhost:{port}"),  # the same page opened as localhost
                         ("127.0.0.1", "https://friend.example"),  # listed (compared normalized)
                         ("127.0.0.1", None)):  # no Origin: not a browser (ds2-demo-client, scripts)
        with open_ws(port, host=host, origin=origin) as ws:
            assert receive(ws)["type"] == "hello", (host, origin)


@pytest.mark.parametrize("origin", ["friend.example", "ftp://friend.example", "http://friend.example/page",
                                    "http://friend.example:99999"])
def test_allowed_origins_must_be_origins(origin):
    with pytest.raises(ValueError, match="`allowed_origins`"):
        DemoConfig("model", allowed_origins=(origin,))


def test_an_idle_connection_is_closed_and_an_active_one_is_not(demo):
    idle = 2.0
    port = demo(idle_seconds=idle).port
    with open_ws(port) as quiet, open_ws(port) as talker:
        opened = time.monotonic()
        assert receive(quiet)["type"] == "hello" and receive(talker)["type"] == "hello"
        quiet.send(json.dumps({"type": "start", "sample_rate": 16000, "encoding": "pcm_s16le"}))
        assert receive(quiet)["type"] == "started"  # an utterance left open does not keep the connection
        talker.send(json.dumps({"type": "start", "sample_rate": 16000, "encoding": "pcm_s16le"}))
        chunks = 0
        while time.monotonic() < opened + 2.5 * idle:  # 0.1 s of audio every idle / 4: never idle
            talker.send(np.zeros(1600, "<i2").tobytes())
            chunks += 1
            time.sleep(idle / 4)
        with pytest.raises(ConnectionClosed) as closed:
            while True:
                quiet.recv(timeout=TIMEOUT)
        assert closed.value.rcvd.code == IDLE_CLOSE_CODE and f"nothing received for {idle:g} s" in \
            closed.value.rcvd.reason
        talker.send(json.dumps({"type": "stop"}))
        while (message := receive(talker))["type"] != "final":
            assert message["type"] in ("started", "partial"), message
        assert message["audio_seconds"] == pytest.approx(0.1 * chunks)


def test_demo_client_says_why_it_was_closed(demo, tmp_path):
    port = demo(idle_seconds=1).port
    wav = tmp_path / "clip.wav"
    save_wav(wav, speech_like_clip(1.0))
    slow = DemoClientConfig(f"127.0.0.1:{port}", str(wav), chunk_ms=100, speed=0.04)  # a chunk every 2.5 s
    with pytest.raises(ConnectionError, match=f"closed the connection \\(close code {IDLE_CLOSE_CODE}: idle: "):
        stream_file(slow)


def test_one_client_at_its_limit_does_not_lock_out_another(demo):
    port = demo(max_streams=3, max_streams_per_client=2).port
    a1, a2 = open_ws(port), open_ws(port)
    assert receive(a1)["type"] == receive(a2)["type"] == "hello"
    with open_ws(port) as a3:  # client A's third connection: over its own limit
        message = receive(a3)
        assert message["type"] == "error" and message["code"] == "busy" and "127.0.0.1" in message["message"]
        with pytest.raises(ConnectionClosed) as closed:
            a3.recv(timeout=TIMEOUT)
        assert closed.value.rcvd.code == TRY_AGAIN_LATER
    with open_ws(port, client="127.0.0.2") as b:  # client B is served while A holds its two
        assert receive(b)["type"] == "hello"
        with open_ws(port, client="127.0.0.3") as c:  # the whole demo's limit still holds
            message = receive(c)
            assert message["code"] == "busy" and "3 connections" in message["message"]
    a1.close()
    with open_ws(port) as again:  # A's closed connection freed its place
        assert receive(again)["type"] == "hello"
    a2.close()


def test_deeply_nested_json_is_a_protocol_error_and_the_connection_stays(demo, caplog):
    """A parser recurses once per level: "[" x 200000 (under the size limit) must not close the connection with 1011
    and a traceback, each time it is sent."""
    port = demo().port
    with open_ws(port) as ws:
        assert receive(ws)["type"] == "hello"
        for text in ("[" * 200000, "[" * 3000, '{"type": "start", "x": ' + "[" * 100 + "]" * 100 + "}"):
            ws.send(text)
            message = receive(ws)
            assert message["type"] == "error" and message["code"] == "protocol", message
            assert len(message["message"]) < 200
        ws.send(json.dumps({"type": "start", "sample_rate": 16000, "encoding": "pcm_s16le"}))
        assert receive(ws)["type"] == "started"  # the same connection goes on
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")], caplog.text[-2000:]


def test_a_message_over_the_size_limit_closes_the_connection(demo):
    """websockets' defaults would buffer 16 messages of 4 MiB per connection (2 GiB over 32 connections)."""
    port = demo().port
    with open_ws(port) as ws:
        assert receive(ws)["type"] == "hello"
        ws.send(json.dumps({"type": "start", "sample_rate": 16000, "encoding": "pcm_s16le"}))
        assert receive(ws)["type"] == "started"
        ws.send(np.zeros(512 * 1024, "<i2").tobytes())  # 1 MiB: 32 s of audio in one message
        with pytest.raises(ConnectionClosed) as closed:
            receive(ws)
        assert closed.value.rcvd.code == MESSAGE_TOO_BIG
    with open_ws(port) as ws:  # the demo goes on
        assert receive(ws)["type"] == "hello"


def test_every_http_answer_carries_the_security_headers(demo):
    """The page can't be framed by another site (frame-ancestors, X-Frame-Options), runs only its own scripts
    (Content-Security-Policy) and is never read as another content type (nosniff)."""
    port = demo().port
    answers = []
    for path in ("/", "/app.js", "/pcm-worklet.js", "/style.css", "/healthz", "/nope", "/ws"):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=TIMEOUT) as response:
                answers.append((path, response.status, response.headers))
        except urllib.error.HTTPError as e:  # 404; /ws without an upgrade: 426
            answers.append((path, e.code, e.headers))
    answers.append(("/ws from another origin", *refused_with_headers(port, origin="http://evil.example")))
    for path, status, headers in answers:
        policy = headers["Content-Security-Policy"] or ""
        assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy, (path, status, policy)
        assert f"connect-src 'self' ws://127.0.0.1:{port} wss://127.0.0.1:{port}" in policy, (path, policy)
        assert headers["X-Content-Type-Options"] == "nosniff" and headers["X-Frame-Options"] == "DENY", (path, status)
    assert [status for _, status, _ in answers] == [200, 200, 200, 200, 200, 404, 426, 403]
