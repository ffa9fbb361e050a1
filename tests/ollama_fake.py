"""An Ollama-API-compatible HTTP server on 127.0.0.1 whose answers come from the packaged
llama.cpp model: ``/api/chat`` (NDJSON streamed and non-streamed), ``/api/tags``,
``/api/show``, ``/api/version``. It records every request for assertions."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from langchain_core.language_models import BaseChatModel

ROLES = {"system": "system", "user": "human", "assistant": "ai"}


def _now() -> str:
    return datetime.now(UTC).isoformat()


class OllamaLike(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, chat: BaseChatModel, models: dict[str, str], delay_s: float = 0.0):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.chat = chat
        self.models = models  # served name -> description
        self.delay_s = delay_s
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()  # one generation at a time, like one Ollama runner

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: OllamaLike

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

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
        if self.server.delay_s:
            time.sleep(self.server.delay_s)
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
    server = OllamaLike(chat, models or {"smollm2": "135M"}, delay_s=delay_s)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
