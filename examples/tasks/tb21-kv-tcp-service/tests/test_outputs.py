"""Talks to the key-value service the agent left running on 127.0.0.1:7000."""

import socket
import time


# The first connection waits up to 5 s for the service; the others do not wait.
_waited = False


class Client:
    def __init__(self):
        global _waited
        deadline = time.monotonic() + (0 if _waited else 5)
        _waited = True
        while True:
            try:
                self.sock = socket.create_connection(("127.0.0.1", 7000), timeout=5)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        self.file = self.sock.makefile("rb")

    def ask(self, line):
        self.sock.sendall(line.encode() + b"\n")
        return self.file.readline().decode().rstrip("\r\n")

    def close(self):
        self.file.close()
        self.sock.close()


def test_set_get_del_count():
    c = Client()
    try:
        start = int(c.ask("COUNT"))
        assert c.ask("SET colour deep blue") == "OK"
        assert c.ask("GET colour") == "deep blue"
        assert c.ask("COUNT") == str(start + 1)
        assert c.ask("DEL colour") == "1"
        assert c.ask("DEL colour") == "0"
        assert c.ask("GET colour") == "NIL"
        assert c.ask("COUNT") == str(start)
    finally:
        c.close()


def test_unknown_commands_are_errors():
    c = Client()
    try:
        assert c.ask("FLY away") == "ERR"
    finally:
        c.close()


def test_clients_share_the_keys():
    a, b = Client(), Client()
    try:
        assert a.ask("SET shared 42") == "OK"
        assert b.ask("GET shared") == "42"
        assert b.ask("SET shared 43") == "OK"
        assert a.ask("GET shared") == "43"
    finally:
        a.close()
        b.close()


def test_several_commands_in_one_write():
    c = Client()
    try:
        c.sock.sendall(b"SET x 1\nSET y 2\nGET x\nGET y\n")
        lines = [c.file.readline().decode().strip() for _ in range(4)]
        assert lines == ["OK", "OK", "1", "2"]
    finally:
        c.close()
