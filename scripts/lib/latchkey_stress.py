"""What the reliability scripts (scripts/stress-*, scripts/check-isolation) share: a private keychain in a
temporary directory served by the real built agent, a small client of the agent protocol (docs/PROTOCOL.md)
and the summary line. Python standard library only.

The client here is deliberately independent of the Swift code it tests: it writes the bytes the protocol
specifies, so a decoder bug cannot hide behind the same bug in an encoder.
"""

import argparse
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# docs/PROTOCOL.md
VERSION = 1
OP_HELLO, OP_ADD, OP_COPY, OP_UPDATE, OP_DELETE = 0x01, 0x10, 0x11, 0x12, 0x13
OP_STATUS, OP_CREATE, OP_UNLOCK, OP_LOCK, OP_CHANGE_PASSWORD = 0x20, 0x21, 0x22, 0x23, 0x24
MAX_REQUEST_FRAME = 1 << 20
MAX_DEPTH = 8

# Apple's OSStatus values the scripts expect (Sources/LatchkeyModel/SecStatus.swift).
SUCCESS = 0
ERR_PARAM = -50
ERR_UNIMPLEMENTED = -4
ERR_AUTH_FAILED = -25293
ERR_DUPLICATE = -25299
ERR_NOT_FOUND = -25300
ERR_INTERACTION_NOT_ALLOWED = -25308


class ProtocolError(Exception):
    """The agent's reply could not be read: closed, cut short, malformed or late."""


# MARK: values (docs/PROTOCOL.md section 3)


def encode_value(value):
    """bytes are data, str string, bool bool, int int, float double, None null, list array, dict dictionary."""
    if isinstance(value, bool):
        return b"\x04" + (b"\x01" if value else b"\x00")
    if isinstance(value, str):
        raw = value.encode()
        return b"\x01" + struct.pack(">I", len(raw)) + raw
    if isinstance(value, (bytes, bytearray)):
        return b"\x02" + struct.pack(">I", len(value)) + bytes(value)
    if isinstance(value, int):
        return b"\x03" + struct.pack(">q", value)
    if isinstance(value, float):
        return b"\x05" + struct.pack(">d", value)
    if value is None:
        return b"\x09"
    if isinstance(value, list):
        return b"\x07" + struct.pack(">I", len(value)) + b"".join(encode_value(v) for v in value)
    if isinstance(value, dict):
        out = [b"\x08", struct.pack(">I", len(value))]
        for key in sorted(value, key=lambda k: k.encode()):
            raw = key.encode()
            out += [struct.pack(">I", len(raw)), raw, encode_value(value[key])]
        return b"".join(out)
    raise TypeError(f"no encoding for {type(value)}")


def decode_value(data, at=0, depth=1):
    """Returns (value, next offset); dates come back as floats."""
    tag = data[at]
    at += 1
    if tag in (0x01, 0x02):
        (n,) = struct.unpack_from(">I", data, at)
        raw = bytes(data[at + 4 : at + 4 + n])
        return (raw.decode() if tag == 0x01 else raw), at + 4 + n
    if tag == 0x03:
        return struct.unpack_from(">q", data, at)[0], at + 8
    if tag == 0x04:
        return data[at] == 1, at + 1
    if tag in (0x05, 0x06):
        return struct.unpack_from(">d", data, at)[0], at + 8
    if tag == 0x09:
        return None, at
    (count,) = struct.unpack_from(">I", data, at)
    at += 4
    if tag == 0x07:
        items = []
        for _ in range(count):
            item, at = decode_value(data, at, depth + 1)
            items.append(item)
        return items, at
    if tag == 0x08:
        entries = {}
        for _ in range(count):
            (n,) = struct.unpack_from(">I", data, at)
            key = bytes(data[at + 4 : at + 4 + n]).decode()
            entries[key], at = decode_value(data, at + 4 + n, depth + 1)
        return entries, at
    raise ProtocolError(f"unknown tag {tag:#x}")


# MARK: requests and frames


def frame(payload):
    return struct.pack(">I", len(payload)) + payload


def request(opcode, *dictionaries):
    return bytes([VERSION, opcode]) + b"".join(encode_value(d) for d in dictionaries)


def secret(raw):
    return struct.pack(">I", len(raw)) + raw


def unlock_request(password):
    return bytes([VERSION, OP_UNLOCK]) + secret(password.encode())


class Connection:
    """One connection to the agent; every read has a deadline, so a hung agent is seen, never waited on."""

    def __init__(self, path, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *_):
        self.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def read_exactly(self, n):
        chunks, got = [], 0
        while got < n:
            try:
                chunk = self.sock.recv(n - got)
            except socket.timeout as error:
                raise ProtocolError("no reply before the deadline") from error
            except OSError as error:
                raise ProtocolError(f"read failed: {error}") from error
            if not chunk:
                raise ProtocolError("connection closed" if got == 0 else "reply cut short")
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def read_reply(self):
        """Returns (status, value, message)."""
        (length,) = struct.unpack(">I", self.read_exactly(4))
        payload = self.read_exactly(length)
        if payload[0] != VERSION:
            raise ProtocolError(f"reply version {payload[0]}")
        status, flags = struct.unpack_from(">iB", payload, 1)
        at, value, message = 6, None, None
        if flags & 0x01:
            value, at = decode_value(payload, at)
        if flags & 0x02:
            (n,) = struct.unpack_from(">H", payload, at)
            message = payload[at + 2 : at + 2 + n].decode()
        return status, value, message

    def call(self, payload):
        try:
            self.sock.sendall(frame(payload))
        except OSError as error:
            raise ProtocolError(f"write failed: {error}") from error
        return self.read_reply()


# MARK: the sandbox


class Sandbox:
    """A keychain of its own: HOME, XDG_RUNTIME_DIR and XDG_DATA_HOME in a temporary directory, the built
    `latchkey` and `latchkeyd`, and every agent it saw killed when it is closed."""

    def __init__(self, name, bin_dir=None, password="stress-password", uid=None):
        bin_dir = bin_dir or os.environ.get("LATCHKEY_BIN_DIR") or os.path.join(REPOSITORY, ".build/debug")
        self.bin_dir = os.path.abspath(bin_dir)
        for tool in ("latchkey", "latchkeyd"):
            if not os.access(os.path.join(self.bin_dir, tool), os.X_OK):
                sys.exit(f"{name}: no {tool} in {self.bin_dir}: run `swift build` first (or pass --bin-dir)")
        self.root = tempfile.mkdtemp(prefix=f"latchkey-{name}.")
        os.chmod(self.root, 0o755)
        self.home = os.path.join(self.root, "home")
        self.runtime = os.path.join(self.root, "run")
        self.data = os.path.join(self.root, "data")
        # uid: the keychain belongs to that user, and `cli` runs as that user (root only).
        self.uid = uid
        for path in (self.home, self.runtime, self.data):
            os.mkdir(path, 0o700)
            if uid is not None:
                os.chown(path, uid, uid)
        self.password = password
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": self.home,
            "XDG_RUNTIME_DIR": self.runtime,
            "XDG_DATA_HOME": self.data,
            "LATCHKEYD": os.path.join(self.bin_dir, "latchkeyd"),
            # No desktop or Secret Service: the scripts test the socket and the store, and a bus the
            # machine happens to have must not be touched.
            "DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent",
            "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=/nonexistent",
        }
        self.agents = set()

    @property
    def socket_path(self):
        return os.path.join(self.runtime, "latchkey", "agent.sock")

    @property
    def keychain(self):
        return os.path.join(self.data, "latchkey")

    @property
    def log_path(self):
        return os.path.join(self.runtime, "latchkey", "agent.log")

    def cli(self, *arguments, stdin=None, timeout=60):
        """Runs `latchkey`; returns the CompletedProcess (never raises for an exit status)."""
        user = {} if self.uid is None else {"user": self.uid, "group": self.uid, "extra_groups": []}
        return subprocess.run(
            [os.path.join(self.bin_dir, "latchkey"), *arguments], input=stdin, env=self.env,
            capture_output=True, text=True, timeout=timeout, **user)

    def create(self):
        """The keychain, with the cheapest Argon2id parameters the CLI accepts (64 MiB, one pass)."""
        done = self.cli("init", "--password-stdin", "--argon2-memory", "64", "--argon2-time", "1",
                        stdin=self.password + "\n")
        if done.returncode != 0:
            sys.exit(f"latchkey init failed: {done.stderr.strip()}\n{self.log_tail()}")
        self.note_agent()

    def unlock(self, password=None):
        """`latchkey unlock` (which starts an agent if none runs); True if it worked."""
        done = self.cli("unlock", "--password-stdin", stdin=(password or self.password) + "\n")
        self.note_agent()
        return done.returncode == 0

    def log_tail(self, lines=15):
        """The end of the agent's log, for a failure message."""
        try:
            with open(self.log_path, errors="replace") as log:
                return "the agent's log ends:\n" + "".join(log.readlines()[-lines:])
        except OSError:
            return "the agent left no log"

    def connect(self, timeout=10.0):
        return Connection(self.socket_path, timeout)

    def agent_pid(self, timeout=5.0):
        """The running agent's pid (from `hello`), or None if none answers."""
        try:
            with self.connect(timeout) as connection:
                status, value, _ = connection.call(request(OP_HELLO))
        except (OSError, ProtocolError):
            return None
        return value.get("pid") if status == SUCCESS and isinstance(value, dict) else None

    def note_agent(self):
        pid = self.agent_pid()
        if pid:
            self.agents.add(pid)
        return pid

    def kill_agent(self, sig=signal.SIGKILL):
        """Signals the running agent and waits until it is gone; returns its pid (None if none ran)."""
        pid = self.agent_pid()
        if pid:
            self.agents.add(pid)
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
            wait_gone(pid)
        return pid

    def stray_agents(self):
        """Processes whose environment names this sandbox's runtime directory: an agent that never answered
        hello (one stuck at start-up) is found here. Best effort: the agent is not dumpable, so only root
        can read its environment."""
        marker = f"XDG_RUNTIME_DIR={self.runtime}".encode()
        found = set()
        for entry in os.listdir("/proc"):
            if entry.isdigit() and int(entry) != os.getpid():
                try:
                    with open(f"/proc/{entry}/environ", "rb") as environ:
                        if marker in environ.read().split(b"\0"):
                            found.add(int(entry))
                except OSError:
                    pass
        return found

    def close(self, keep=False):
        for pid in self.agents | self.stray_agents():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            wait_gone(pid)
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)


def alive(pid):
    """True while `pid` runs: a zombie (a daemonised agent reparented to a PID 1 that does not reap) is gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def wait_gone(pid, timeout=10.0):
    end = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < end:
        time.sleep(0.01)
    return not alive(pid)


def integrity_check(keychain):
    """`PRAGMA integrity_check` on a copy of the database and its WAL (so that checking cannot checkpoint
    or recover the files the agent opens next); returns sqlite's answer, "ok" when intact."""
    with tempfile.TemporaryDirectory(prefix="latchkey-integrity.") as copy:
        for suffix in ("", "-wal"):
            source = os.path.join(keychain, "keychain.db" + suffix)
            if os.path.exists(source):
                shutil.copyfile(source, os.path.join(copy, "keychain.db" + suffix))
        database = os.path.join(copy, "keychain.db")
        if not os.path.exists(database):
            return "no database"
        if shutil.which("sqlite3"):
            done = subprocess.run(["sqlite3", database, "PRAGMA integrity_check;"], capture_output=True, text=True)
            return (done.stdout.strip() or done.stderr.strip()).replace("\n", "; ")
        import sqlite3

        with sqlite3.connect(database) as db:
            return "; ".join(row[0] for row in db.execute("PRAGMA integrity_check"))


# MARK: running a script


def arguments(description, duration_name, duration_default, duration_help, extra=None):
    """The common command line: the bounded duration, --seed, --bin-dir, --keep."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(duration_name, type=int, default=duration_default, help=duration_help)
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: time-based, printed)")
    parser.add_argument("--bin-dir", default=None, help="where latchkey and latchkeyd are (default .build/debug)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary keychain for inspection")
    if extra:
        extra(parser)
    options = parser.parse_args()
    if options.seed is None:
        options.seed = int(time.time() * 1000) % (1 << 32)
    return options


def finish(name, failures, figures, started):
    """Prints the PASS/FAIL line with the figures and exits 0 or 1."""
    elapsed = time.monotonic() - started
    verdict = "PASS" if not failures else "FAIL"
    print(f"{name}: {verdict}: {figures} ({elapsed:.1f} s)")
    for failure in failures[:20]:
        print(f"  {failure}")
    if len(failures) > 20:
        print(f"  ... and {len(failures) - 20} more")
    sys.exit(0 if not failures else 1)
