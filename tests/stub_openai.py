"""A stub OpenAI-compatible HTTP server for plumbing tests of the HTTP backend (not a model:
each test scripts its replies)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


class StubServer:
    """``handler(path, body) -> (status, reply dict or raw bytes, delay seconds)``."""

    def __init__(self, handler: Callable):
        self.handler = handler
        self.requests: list[tuple[str, dict]] = []
        self.active = 0
        self.max_active = 0
        lock = threading.Lock()
        outer = self

        class H(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                with lock:
                    outer.requests.append((self.path, body))
                    outer.active += 1
                    outer.max_active = max(outer.max_active, outer.active)
                try:
                    status, reply, delay = outer.handler(self.path, body)
                    if delay:
                        time.sleep(delay)
                    data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    with lock:
                        outer.active -= 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> "StubServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def chat_reply(text: str, prompt_tokens: int = 10, completion_tokens: int = 5) -> dict:
    return {"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}
