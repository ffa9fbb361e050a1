"""Test HTTP servers on 127.0.0.1.

:class:`QuietHTTPServer` / :func:`running` are the base of every in-process test server: handler
threads are joined when the server closes and nothing is written to stderr (a client that went
away is not a test failure, and a traceback printed by a leftover thread would land in another
test's captured output). :class:`OllamaLike` is an Ollama-API-compatible server whose answers
come from the packaged llama.cpp model: ``/api/chat`` (NDJSON streamed and non-streamed),
``/api/tags``, ``/api/show``, ``/api/version``. It records every request for assertions."""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

from langchain_core.language_models import BaseChatModel

ROLES = {"system": "system", "user": "human", "assistant": "ai"}


def _now() -> str:
    return datetime.now(UTC).isoformat()


class QuietHTTPServer(ThreadingHTTPServer):
    """A threaded HTTP server on a free port of 127.0.0.1 that joins its handler threads on
    close and records handler errors in ``errors`` instead of printing them. ``stopping`` is
    set when it shuts down, so slow handlers can end early."""

    daemon_threads = False
    block_on_close = True

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(("127.0.0.1", 0), handler)
        self.errors: list[BaseException] = []
        self.stopping = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        self.errors.append(sys.exc_info()[1] or RuntimeError("unknown handler error"))


class QuietHandler(BaseHTTPRequestHandler):
    """A request handler that logs nothing."""

    def log_message(self, format: str, *args: Any) -> None:
        pass


ServerT = TypeVar("ServerT", bound=QuietHTTPServer)


@contextmanager
def running(server: ServerT) -> Iterator[ServerT]:
    """Serve in a thread; on exit stop, close (joining handler threads) and join the thread."""
    thread = threading.Thread(target=server.serve_forever, name=f"test-server-{server.url}")
    thread.start()
    try:
        yield server
    finally:
        server.stopping.set()
        server.shutdown()
        server.server_close()
        thread.join()


class OllamaLike(QuietHTTPServer):
    def __init__(self, chat: BaseChatModel, models: dict[str, str], delay_s: float = 0.0):
        super().__init__(_Handler)
        self.chat = chat
        self.models = models  # served name -> description
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()  # one generation at a time, like one Ollama runner


class _Handler(QuietHandler):
    server: OllamaLike

    def _json(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def do_GET(self) -> None:
        if self.path == "/api/tags":
            models = [
                {
                    "name": name,
                    "model": name,
                    "modified_at": _now(),
                    "size": 1,
                    "digest": "0" * 64,
                    "details": {"format": "gguf", "family": "llama", "parameter_size": desc},
                }
                for name, desc in self.server.models.items()
            ]
            self._json(200, {"models": models})
        elif self.path == "/api/version":
            self._json(200, {"version": "0.0.0-test"})
        else:
            self._json(404, {"error": f"unknown path {self.path}"})

    def do_POST(self) -> None:
        body = self._body()
        with self.server.lock:
            self.server.requests.append({"path": self.path, **body})
        if self.path == "/api/show":
            if body.get("model") not in self.server.models:
                self._json(404, {"error": f"model '{body.get('model')}' not found"})
            else:
                self._json(200, {"modelfile": "", "parameters": "", "template": "", "details": {}})
            return
        if self.path != "/api/chat":
            self._json(404, {"error": f"unknown path {self.path}"})
            return
        model = body.get("model")
        if model not in self.server.models:
            self._json(404, {"error": f"model '{model}' not found, try pulling it first"})
            return
        if self.server.delay_s and self.server.stopping.wait(self.server.delay_s):
            return
        messages = [(ROLES.get(m["role"], "human"), m.get("content", "")) for m in body["messages"]]
        options = body.get("options") or {}
        kwargs: dict[str, Any] = {}
        for ours, theirs in (("temperature", "temperature"), ("seed", "seed")):
            if theirs in options:
                kwargs[ours] = options[theirs]
        if options.get("num_predict"):
            kwargs["max_tokens"] = int(options["num_predict"])
        if options.get("stop"):
            kwargs["stop"] = list(options["stop"])
        final = {
            "model": model,
            "created_at": _now(),
            "message": {"role": "assistant", "content": ""},
            "done": True,
            "done_reason": "stop",
            "total_duration": 1,
            "load_duration": 1,
            "prompt_eval_count": 1,
            "prompt_eval_duration": 1,
            "eval_count": 1,
            "eval_duration": 1,
        }
        if body.get("stream", True):
            self.send_response(200)
            self.send_header("Content-Type", "application/x-ndjson")
            self.end_headers()
            with self.server.lock:
                chunks = [str(c.content) for c in self.server.chat.stream(messages, **kwargs)]
            for text in chunks:
                line = {
                    "model": model,
                    "created_at": _now(),
                    "message": {"role": "assistant", "content": text},
                    "done": False,
                }
                self.wfile.write((json.dumps(line) + "\n").encode())
            self.wfile.write((json.dumps(final) + "\n").encode())
            return
        with self.server.lock:
            reply = self.server.chat.invoke(messages, **kwargs)
        final["message"]["content"] = str(reply.content)
        self._json(200, final)


@contextmanager
def serve(
    chat: BaseChatModel, models: dict[str, str] | None = None, *, delay_s: float = 0.0
) -> Iterator[OllamaLike]:
    with running(OllamaLike(chat, models or {"smollm2": "135M"}, delay_s=delay_s)) as server:
        yield server
