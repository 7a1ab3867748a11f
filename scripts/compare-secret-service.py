"""The calls of scripts/compare-secret-service: puts a fixed sequence of Secret Service calls to whoever
owns org.freedesktop.secrets on $DBUS_SESSION_BUS_ADDRESS and prints, one line each, the reply (or the
error's name), the properties read and the signals the call made, with object paths named by role so
that two implementations' transcripts can be compared with diff. Run by the venv's python (jeepney).
"""

import re
import time

from jeepney import DBusAddress, HeaderFields, MatchRule, MessageType, new_method_call
from jeepney.io.blocking import open_dbus_connection

ROOT = "/org/freedesktop/secrets"
SERVICE = "org.freedesktop.Secret.Service"
COLLECTION = "org.freedesktop.Secret.Collection"
ITEM = "org.freedesktop.Secret.Item"
PROPS = "org.freedesktop.DBus.Properties"
LOGIN = ROOT + "/collection/login"
SESSION_COLLECTION = ROOT + "/collection/session"
# Paths that name nothing, in the forms each implementation uses for items.
MISSING_ITEMS = [LOGIN + "/999", LOGIN + "/" + "0" * 32, LOGIN + "/not_an_item"]
MISSING_COLLECTION = ROOT + "/collection/nope"

conn = open_dbus_connection(bus="SESSION")
roles = {}
counters = {}


def role(path):
    """A path's name in the transcript: fixed ones as they are, others by kind and first appearance."""
    if not isinstance(path, str) or not path.startswith(ROOT + "/"):
        return path
    if path in (LOGIN, SESSION_COLLECTION, MISSING_COLLECTION) or path in MISSING_ITEMS:
        return path
    if path.startswith(ROOT + "/aliases/"):
        return path
    if path not in roles:
        parts = path[len(ROOT) + 1 :].split("/")
        if parts[0] == "collection":
            kind = "item" if len(parts) == 3 else "collection"
            if kind == "item" and parts[1] == "session":
                kind = "session-item"
        else:
            kind = parts[0]
        counters[kind] = counters.get(kind, 0) + 1
        roles[path] = "<%s%d>" % (kind, counters[kind])
    return roles[path]


def show(value):
    """A reply value with paths named by role and times shown as <now> (within a day) or as they are."""
    if (isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], str)
            and re.fullmatch(r"[a-z{}()]{1,8}", value[0])):
        # A variant as jeepney reads it: (signature, value).
        return show(value[1])
    if isinstance(value, (list, tuple)):
        return [show(v) for v in value]
    if isinstance(value, dict):
        return {show(k): show(v) for k, v in sorted(value.items())}
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, int) and not isinstance(value, bool) and abs(value - time.time()) < 86400:
        return "<now>"
    return role(value)


def call(path, interface, member, signature=None, *args):
    message = new_method_call(DBusAddress(path, "org.freedesktop.secrets", interface), member, signature, args)
    reply = conn.send_and_get_reply(message, timeout=10)
    if reply.header.message_type == MessageType.error:
        return "error " + reply.header.fields.get(HeaderFields.error_name, "?")
    return reply.body


signals = []
rule = MatchRule(type="signal", path_namespace=ROOT)
conn.send_and_get_reply(
    new_method_call(
        DBusAddress("/org/freedesktop/DBus", "org.freedesktop.DBus", "org.freedesktop.DBus"),
        "AddMatch",
        "s",
        (rule.serialise(),),
    )
)


# Kept for the whole run: a service may emit a call's signals before its reply or after it.
queue = conn.filter(MatchRule(type="signal"), bufsize=10000).queue


def drain():
    """The signals received since the last call (waits briefly for those that follow the reply)."""
    deadline = time.time() + 0.3
    while time.time() < deadline:
        try:
            conn.recv_messages(timeout=0.05)
        except TimeoutError:
            pass
    found = []
    while queue:
        m = queue.popleft()
        path = m.header.fields.get(HeaderFields.path)
        if not path.startswith(ROOT):
            continue
        found.append("%s %s.%s %s" % (role(path), m.header.fields.get(HeaderFields.interface),
                                      m.header.fields.get(HeaderFields.member), show(m.body)))
    return sorted(found)


def step(name, path, interface, member, signature=None, *args):
    result = call(path, interface, member, signature, *args)
    print("%s: %s" % (name, show(result)))
    for signal in drain():
        print("    signal %s" % signal)
    return result


def props(name, path, interface):
    return step(name + " GetAll", path, PROPS, "GetAll", "s", interface)


def reply(result):
    """A reply's arguments; None for an error."""
    return result if isinstance(result, tuple) else None


attributes = {"service": "compare", "account": "alice"}


def item_properties(label, attrs):
    return {
        ITEM + ".Label": ("s", label),
        ITEM + ".Attributes": ("a{ss}", attrs),
    }


drain()
props("service", ROOT, SERVICE)
props("login", LOGIN, COLLECTION)
props("alias default", ROOT + "/aliases/default", COLLECTION)
for alias in ["default", "session", "login", "nope"]:
    step("ReadAlias " + alias, ROOT, SERVICE, "ReadAlias", "s", alias)
props("session collection", SESSION_COLLECTION, COLLECTION)
step("OpenSession bogus", ROOT, SERVICE, "OpenSession", "sv", "bogus", ("s", ""))
session = step("OpenSession plain", ROOT, SERVICE, "OpenSession", "sv", "plain", ("s", ""))[1]
secret = (session, b"", b"s3cret", "text/plain")

item = reply(step("CreateItem login", LOGIN, COLLECTION, "CreateItem", "a{sv}(oayays)b",
                  item_properties("First", attributes), secret, False))[0]
props("item", item, ITEM)
step("CreateItem replace", LOGIN, COLLECTION, "CreateItem", "a{sv}(oayays)b",
     item_properties("Replaced", attributes), (session, b"", b"second", "text/plain"), True)
duplicate = reply(step("CreateItem no replace", LOGIN, COLLECTION, "CreateItem", "a{sv}(oayays)b",
                       item_properties("Duplicate", attributes), secret, False))[0]
step("item Set Label", item, PROPS, "Set", "ssv", ITEM, "Label", ("s", "Renamed"))
step("item Set Attributes", item, PROPS, "Set", "ssv", ITEM, "Attributes",
     ("a{ss}", dict(attributes, extra="x")))
step("item SetSecret", item, ITEM, "SetSecret", "(oayays)", (session, b"", b"third", "text/plain"))
step("item GetSecret", item, ITEM, "GetSecret", "o", session)
step("GetSecrets", ROOT, SERVICE, "GetSecrets", "aoo", [item] + MISSING_ITEMS[:2], session)
step("SearchItems", ROOT, SERVICE, "SearchItems", "a{ss}", {"service": "compare"})
step("login SearchItems", LOGIN, COLLECTION, "SearchItems", "a{ss}", {"extra": "x"})

for missing in MISSING_ITEMS:
    step("Get Label " + missing, missing, PROPS, "Get", "ss", ITEM, "Label")
    step("GetAll " + missing, missing, PROPS, "GetAll", "s", ITEM)
    step("Set Label " + missing, missing, PROPS, "Set", "ssv", ITEM, "Label", ("s", "x"))
    step("GetSecret " + missing, missing, ITEM, "GetSecret", "o", session)
    step("SetSecret " + missing, missing, ITEM, "SetSecret", "(oayays)", secret)
    step("Delete " + missing, missing, ITEM, "Delete")
step("GetAll missing collection", MISSING_COLLECTION, PROPS, "GetAll", "s", COLLECTION)
step("Get Label missing collection", MISSING_COLLECTION, PROPS, "Get", "ss", COLLECTION, "Label")
step("SearchItems missing collection", MISSING_COLLECTION, COLLECTION, "SearchItems", "a{ss}", {})
step("CreateItem missing collection", MISSING_COLLECTION, COLLECTION, "CreateItem", "a{sv}(oayays)b",
     item_properties("x", {}), secret, False)
step("Delete missing collection", MISSING_COLLECTION, COLLECTION, "Delete")
step("Get Label missing alias", ROOT + "/aliases/nope", PROPS, "Get", "ss", COLLECTION, "Label")
step("GetSecret missing session", item, ITEM, "GetSecret", "o", ROOT + "/session/nope")
step("GetSecret session root", item, ITEM, "GetSecret", "o", "/")
step("CreateItem missing session", LOGIN, COLLECTION, "CreateItem", "a{sv}(oayays)b",
     item_properties("x", {}), (ROOT + "/session/nope", b"", b"x", "text/plain"), False)
step("Set Locked (read-only)", item, PROPS, "Set", "ssv", ITEM, "Locked", ("b", True))
step("Set Created (read-only)", item, PROPS, "Set", "ssv", ITEM, "Created", ("t", 1))
step("Get unknown property", item, PROPS, "Get", "ss", ITEM, "Nope")
step("Get unknown interface", item, PROPS, "Get", "ss", "org.example.Nope", "Label")
step("unknown method", ROOT, SERVICE, "Nope")
step("SetAlias to missing", ROOT, SERVICE, "SetAlias", "so", "x", MISSING_COLLECTION)
step("SetAlias bad name", ROOT, SERVICE, "SetAlias", "so", "bad name", LOGIN)
step("Prompt missing", ROOT + "/prompt/nope", "org.freedesktop.Secret.Prompt", "Prompt", "s", "")
step("Dismiss missing", ROOT + "/prompt/nope", "org.freedesktop.Secret.Prompt", "Dismiss")

in_session = reply(step("CreateItem session collection", SESSION_COLLECTION, COLLECTION, "CreateItem",
                        "a{sv}(oayays)b", item_properties("Ephemeral", {"kind": "session"}), secret, True))
if in_session:
    props("session item", in_session[0], ITEM)
    step("session item GetSecret", in_session[0], ITEM, "GetSecret", "o", session)
step("SearchItems session", ROOT, SERVICE, "SearchItems", "a{ss}", {"kind": "session"})
props("session collection after", SESSION_COLLECTION, COLLECTION)

work = reply(step("CreateCollection", ROOT, SERVICE, "CreateCollection", "a{sv}s",
                  {COLLECTION + ".Label": ("s", "Work")}, ""))
if work and work[0] != "/":
    props("new collection", work[0], COLLECTION)
    step("new collection Set Label", work[0], PROPS, "Set", "ssv", COLLECTION, "Label", ("s", "Work 2"))
    step("SetAlias work", ROOT, SERVICE, "SetAlias", "so", "work", work[0])
    step("ReadAlias work", ROOT, SERVICE, "ReadAlias", "s", "work")
    step("CreateItem new collection", work[0], COLLECTION, "CreateItem", "a{sv}(oayays)b",
         item_properties("W", {"w": "1"}), secret, False)
    step("Delete new collection", work[0], COLLECTION, "Delete")
    step("ReadAlias work after", ROOT, SERVICE, "ReadAlias", "s", "work")
props("service after", ROOT, SERVICE)

step("Delete duplicate", duplicate, ITEM, "Delete")
step("Lock login", ROOT, SERVICE, "Lock", "ao", [LOGIN])
props("login locked", LOGIN, COLLECTION)
props("session collection while login locked", SESSION_COLLECTION, COLLECTION)
props("locked item", item, ITEM)
step("SearchItems locked", ROOT, SERVICE, "SearchItems", "a{ss}", {"service": "compare"})
step("login SearchItems locked", LOGIN, COLLECTION, "SearchItems", "a{ss}", {"service": "compare"})
step("GetSecret locked", item, ITEM, "GetSecret", "o", session)
step("GetSecrets locked", ROOT, SERVICE, "GetSecrets", "aoo", [item], session)
step("Set Label locked", item, PROPS, "Set", "ssv", ITEM, "Label", ("s", "x"))
step("CreateItem locked", LOGIN, COLLECTION, "CreateItem", "a{sv}(oayays)b",
     item_properties("x", {"y": "z"}), secret, False)
unlocked = reply(step("Unlock login", ROOT, SERVICE, "Unlock", "ao", [LOGIN]))
if unlocked and unlocked[1] != "/":
    step("Dismiss", unlocked[1], "org.freedesktop.Secret.Prompt", "Dismiss")
step("Delete locked item", item, ITEM, "Delete")
step("Close session", session, "org.freedesktop.Secret.Session", "Close")
step("Close session again", session, "org.freedesktop.Secret.Session", "Close")
step("Unlock missing", ROOT, SERVICE, "Unlock", "ao", MISSING_ITEMS[:2] + [MISSING_COLLECTION])
step("Lock missing", ROOT, SERVICE, "Lock", "ao", MISSING_ITEMS[:2] + [MISSING_COLLECTION])
step("Delete login", LOGIN, COLLECTION, "Delete")
