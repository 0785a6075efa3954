"""Where the app serves: the checks of its --host and --port flags, asked before the model loads, since gradio
itself retries every port of its range on a host it cannot serve on."""

from __future__ import annotations

import argparse
import socket


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
