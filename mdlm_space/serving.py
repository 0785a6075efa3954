"""Where the app serves: the checks of its --host and --port flags, asked before the model loads, since gradio
itself retries every port of its range on a host it cannot serve on; and where gradio keeps what is uploaded."""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable


def port_number(text: str) -> int:
    """--port: a TCP port from 1 to 65535 (argparse names the flag when it is not one)."""
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be a port number from 1 to 65535, got {text!r}")
    return port


def host_problem(host: str) -> str | None:
    """Why the app cannot serve on --host (a name that does not resolve, an address of another machine), or None;
    gradio itself would try each port of its range there, for minutes."""
    try:
        addresses = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as error:
        return f"--host {host}: the name does not resolve ({error})"
    reason = ""
    for family, _, _, _, address in addresses:  # localhost may be ::1 on a machine without IPv6, and 127.0.0.1
        try:
            with socket.socket(family, socket.SOCK_STREAM) as probe:
                probe.bind((address[0], 0, *address[2:]))  # any free port: only the address is asked about
            return None
        except OSError as error:
            reason = error.strerror or str(error)
    return f"--host {host}: not an address this machine can serve on ({reason})"


# gradio serves an upload route whether or not an app takes files (this one takes none): it is refused (`NoUploads`;
# capped per file only, 350 uploads of 100 kB left 36 MB on disk, each served back), and what gradio writes is kept
# only while the app runs
MAX_UPLOAD = "100kb"
UPLOADS_ENV_VAR = "GRADIO_TEMP_DIR"  # where gradio keeps uploads and the files it serves
NO_FILES = "this app takes no files: uploads are refused"


class NoUploads:
    """ASGI middleware that answers gradio's upload route with 403 before it reads the body: the app takes no files."""

    def __init__(self, app: Callable) -> None:
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and scope["path"].rstrip("/").endswith("/upload"):
            body = json.dumps({"error": NO_FILES}).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 403, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


# sessions gradio keeps (its default: 10,000): each holds a copy of this app's large config, about 450 KB, and every
# API call makes one, so memory grew by that much a call until 10,000 (benchmarks/app_memory.py); past the cap the
# least recently used goes, with its replay frames
SESSION_CAPACITY = 64


def launch_limits() -> dict:
    """What `launch()` takes to bound what a visitor can send and the server keeps: the upload size, no upload route
    at all, and SESSION_CAPACITY sessions."""
    from starlette.middleware import Middleware

    return dict(
        max_file_size=MAX_UPLOAD,
        app_kwargs={"middleware": [Middleware(NoUploads)]},
        state_session_capacity=SESSION_CAPACITY,
    )


def private_uploads() -> tuple[str, Callable[[], None]]:
    """A new folder for gradio's uploads (inside $GRADIO_TEMP_DIR when set), named in $GRADIO_TEMP_DIR for the
    server to come, and deleted when the app exits (SIGTERM included); the folder and its clean-up."""
    folder = tempfile.mkdtemp(prefix="mdlm-app-uploads-", dir=os.environ.get(UPLOADS_ENV_VAR))
    os.environ[UPLOADS_ENV_VAR] = folder

    def clean_up() -> None:
        shutil.rmtree(folder, ignore_errors=True)

    atexit.register(clean_up)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:  # `kill`, a container's stop: exit, so clean_up runs
        signal.signal(signal.SIGTERM, lambda *_: exit(143))
    return folder, clean_up
