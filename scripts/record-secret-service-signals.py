"""The operations of scripts/record-secret-service-signals, one by one, each after a marker signal on
/marker (`run SERVICE`), and the dbus-monitor log they leave as one line per Secret Service signal
under each operation, object paths by role (`show LOG`). Run by Debian's /usr/bin/python3 (python3-gi).
"""

import re
import subprocess
import sys
import time

ROOT = "/org/freedesktop/secrets"
SVC = "org.freedesktop.Secret.Service"
COL = "org.freedesktop.Secret.Collection"
ITEM = "org.freedesktop.Secret.Item"
PROPS = "org.freedesktop.DBus.Properties"
LOGIN = ROOT + "/collection/login"
GUILTY = "org.gnome.keyring.InternalUnsupportedGuiltRiddenInterface"


def run(mode):
    from gi.repository import Gio, GLib

    bus = Gio.bus_get_sync(Gio.BusType.SESSION)

    def call(path, iface, member, sig=None, *args):
        v = GLib.Variant("(" + sig + ")", args) if sig else None
        return bus.call_sync("org.freedesktop.secrets", path, iface, member, v, None, 0, 20000, None).unpack()

    def mark(name):
        time.sleep(0.4)
        bus.emit_signal(None, "/marker", "org.example.Marker", "Step", GLib.Variant("(s)", (name,)))
        bus.flush_sync()
        time.sleep(0.1)

    def sh(cmd, inp=None):
        subprocess.run(cmd, shell=True, input=inp, text=True, check=False, stdout=subprocess.DEVNULL)

    session = call(ROOT, SVC, "OpenSession", "sv", "plain", GLib.Variant("s", ""))[1]

    def secret(s):
        return (session, b"", s.encode(), "text/plain")

    def props(label, attrs):
        return {ITEM + ".Label": GLib.Variant("s", label), ITEM + ".Attributes": GLib.Variant("a{ss}", attrs)}

    mark("CreateItem")
    item = call(LOGIN, COL, "CreateItem", "a{sv}(oayays)b", props("First", {"a": "1"}), secret("s1"), False)[0]
    mark("CreateItem replace")
    call(LOGIN, COL, "CreateItem", "a{sv}(oayays)b", props("First again", {"a": "1"}), secret("s2"), True)
    mark("SetSecret")
    call(item, ITEM, "SetSecret", "(oayays)", secret("s3"))
    mark("item Set Label")
    call(item, PROPS, "Set", "ssv", ITEM, "Label", GLib.Variant("s", "Renamed"))
    mark("item Set Attributes")
    call(item, PROPS, "Set", "ssv", ITEM, "Attributes", GLib.Variant("a{ss}", {"a": "1", "b": "2"}))
    mark("item Delete")
    call(item, ITEM, "Delete")
    mark("CreateCollection")
    if mode == "gnome-keyring":
        # CreateCollection asks for the new keyring's password through gcr's prompter, which is not here.
        work = call(ROOT, GUILTY, "CreateWithMasterPassword",
                    "a{sv}(oayays)", {COL + ".Label": GLib.Variant("s", "Work")}, (session, b"", b"pw", "text/plain"))[0]
    else:
        work = call(ROOT, SVC, "CreateCollection", "a{sv}s", {COL + ".Label": GLib.Variant("s", "Work")}, "")[0]
    mark("collection Set Label")
    call(work, PROPS, "Set", "ssv", COL, "Label", GLib.Variant("s", "Work 2"))
    mark("SetAlias default -> new collection")
    call(ROOT, SVC, "SetAlias", "so", "default", work)
    mark("CreateItem in aliased collection")
    witem = call(work, COL, "CreateItem", "a{sv}(oayays)b", props("W", {"w": "1"}), secret("w"), False)[0]
    mark("item Delete in aliased collection")
    call(witem, ITEM, "Delete")
    mark("SetAlias default -> login")
    call(ROOT, SVC, "SetAlias", "so", "default", LOGIN)
    mark("collection Delete")
    call(work, COL, "Delete")
    kept = call(LOGIN, COL, "CreateItem", "a{sv}(oayays)b", props("Kept", {"k": "1"}), secret("k"), False)[0]
    mark("Service Lock")
    call(ROOT, SVC, "Lock", "ao", [LOGIN])
    mark("Unlock from outside")
    if mode == "gnome-keyring":
        call(ROOT, GUILTY, "UnlockWithMasterPassword",
             "o(oayays)", LOGIN, (session, b"", b"pw", "text/plain"))
    else:
        sh("latchkey unlock --password-stdin", "pw\n")
    mark("Lock from outside")
    if mode == "gnome-keyring":
        sh("secret-tool lock --collection=login 2>/dev/null || true")
    else:
        sh("latchkey lock")
    mark("Unlock from outside 2")
    if mode == "gnome-keyring":
        call(ROOT, GUILTY, "UnlockWithMasterPassword",
             "o(oayays)", LOGIN, (session, b"", b"pw", "text/plain"))
    else:
        sh("latchkey unlock --password-stdin", "pw\n")
    mark("secret-tool store (another client)")
    sh("secret-tool store --label=Outside o 1", "x")
    mark("secret-tool store replace (another client)")
    sh("secret-tool store --label=Outside2 o 1", "y")
    mark("secret-tool clear (another client)")
    sh("secret-tool clear o 1")
    if mode == "latchkey":
        mark("SecItem add")
        sh("latchkey add-generic-password -s svc -a acct -w pw1")
        mark("SecItem update")
        sh("latchkey add-generic-password -s svc -a acct -w pw2 -U")
        mark("SecItem delete")
        sh("latchkey delete-generic-password -s svc -a acct")
    mark("end")


def show(log):
    text = open(log).read()
    roles = {}

    def role(match):
        path = match.group(0)
        if re.fullmatch(ROOT + r"(/collection/(login|session)|/aliases/\w+)?", path):
            return path[len(ROOT):] or "/"
        if path not in roles:
            parts = path.split("/")[4:]
            kind = "item" if len(parts) == 3 else parts[0]
            roles[path] = "<%s%d>" % (kind, sum(1 for v in roles.values() if v.startswith("<" + kind)) + 1)
        return roles[path]

    for block in re.split(r"\n(?=signal )", text):
        if not block.startswith("signal "):
            continue
        head = block.split("\n")[0]
        path = re.search(r"path=([^;]+);", head).group(1)
        interface = re.search(r"interface=([^;]+);", head).group(1)
        member = re.search(r"member=(\S+)", head).group(1)
        body = re.sub(r"\s+", " ", " ".join(line.strip() for line in block.split("\n")[1:]))
        if path == "/marker":
            print("== " + re.search(r'string "([^"]*)"', body).group(1))
            continue
        if not path.startswith(ROOT):
            continue
        body = re.sub(ROOT + r"[/\w]*", role, body)
        body = re.sub(r"uint64 1\d{9}", "uint64 <now>", body)
        body = body.replace('string "org.freedesktop.Secret.', 'string "')
        print("   %s %s.%s %s" % (re.sub(ROOT + r"[/\w]*", role, path), interface.split(".")[-1], member, body))


if __name__ == "__main__":
    if sys.argv[1] == "run":
        run(sys.argv[2])
    else:
        show(sys.argv[2])
