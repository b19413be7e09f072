"""A TCP relay in front of an upstream hub: the network between two hubs, which a test can slow
down (a rate for the bytes coming back) and cut (every connection dropped, new ones refused) and
mend again on the same port."""
from __future__ import annotations

import contextlib
import socket
import threading
import time


class Relay:
    def __init__(self, target: tuple[str, int]) -> None:
        """Bound to a port of its own but not listening: connections are refused until `start`."""
        self.target = target
        self.rate: float | None = None  # bytes per second from the upstream, per connection; None = as fast as it goes
        self.lock = threading.Lock()
        self.live: set[socket.socket] = set()
        self.sock: socket.socket | None = None
        self.bound = self._bind(0)
        self.port = self.bound.getsockname()[1]

    @staticmethod
    def _bind(port: int) -> socket.socket:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        return sock

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> Relay:
        """Listening (again, after a `cut`), on the same port."""
        sock, self.bound = self.bound or self._bind(self.port), None
        sock.listen(128)
        self.sock = sock
        threading.Thread(target=self._accept, args=(sock,), daemon=True).start()
        return self

    def cut(self) -> None:
        """The upstream becomes unreachable: connections in flight break, new ones are refused."""
        sock, self.sock = self.sock, None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        with self.lock:
            live, self.live = self.live, set()
        for s in live:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def _accept(self, sock: socket.socket) -> None:
        while True:
            try:
                client, _ = sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.live |= {client, server}
            threading.Thread(target=self._pipe, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, True), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, throttled: bool) -> None:
        sent, began = 0, time.monotonic()
        try:
            while data := src.recv(1 << 16):
                dst.sendall(data)
                rate = self.rate if throttled else None
                if rate:
                    sent += len(data)
                    ahead = sent / rate - (time.monotonic() - began)
                    if ahead > 0:
                        time.sleep(ahead)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
            with self.lock:
                self.live -= {src, dst}
