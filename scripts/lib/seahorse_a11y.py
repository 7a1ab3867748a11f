"""Reads and drives Seahorse's windows through their accessible tree (AT-SPI), for
Tests/LatchkeySecretServiceTests/SeahorseTests.swift. Run by Debian's /usr/bin/python3 (python3-pyatspi)
with DISPLAY and AT_SPI_BUS_ADDRESS of the test's Xvfb and accessibility bus. Clicks and typing go
through xdotool at the element's place on the screen, as a user's would.

  seahorse_a11y.py state                  JSON: windows, items listed, whether "Keyring is locked" shows,
                                          the texts of the dialogs' entries
  seahorse_a11y.py click ROLE NAME [N]    clicks (N times) the first showing element with that role and name
                                          (its first line), in the topmost window first
  seahorse_a11y.py click-tooltip ROLE T   the same, for an element whose description contains T
  seahorse_a11y.py fill WINDOW ROLE TEXT  types TEXT into the first showing ROLE (an entry) of WINDOW
  seahorse_a11y.py replace WINDOW OLD NEW types NEW over the text of the showing entry of WINDOW that reads OLD
  seahorse_a11y.py resize W H             sizes the main window (no window manager under Xvfb); exits 1
                                          until it has that size

Exits 1 when the element is not there (yet): the test waits by asking again.
"""

import json
import subprocess
import sys

import pyatspi

MAX_DEPTH = 40


def walk(node, depth=0):
    """Every accessible under `node`, depth first; parts that vanish while read are skipped."""
    try:
        yield node
        if depth >= MAX_DEPTH:
            return
        for i in range(node.childCount):
            child = node.getChildAtIndex(i)
            if child is not None:
                yield from walk(child, depth + 1)
    except Exception:
        return


def seahorse():
    desktop = pyatspi.Registry.getDesktop(0)
    for i in range(desktop.childCount):
        app = desktop.getChildAtIndex(i)
        if app is not None and app.name == "seahorse":
            return app
    return None


def showing(node):
    try:
        return pyatspi.STATE_SHOWING in node.getState().getStates()
    except Exception:
        return False


def text_of(node):
    try:
        return node.queryText().getText(0, -1)
    except Exception:
        return None


def windows(app):
    return [w for w in (app.getChildAtIndex(i) for i in range(app.childCount)) if w is not None and showing(w)]


def listed_items(frame):
    """The labels of the items in the main window's list: rows holding a kind ("Password or Secret",
    "Stored note", ...) and a label whose first line is the item's label."""
    found = []
    for node in walk(frame):
        try:
            if node.getRoleName() != "list item" or not showing(node) or node.childCount != 1:
                continue
            panel = node.getChildAtIndex(0)
            if panel.getRoleName() != "panel":
                continue
            labels = [c for c in (panel.getChildAtIndex(i) for i in range(panel.childCount))
                      if c is not None and c.getRoleName() == "label"]
            if len(labels) == 2:
                found.append(labels[1].name.split("\n")[0])
        except Exception:
            continue
    return sorted(found)


def state():
    app = seahorse()
    if app is None:
        return {"running": False}
    result = {"running": True, "windows": [], "items": [], "locked": False, "entries": {}}
    for window in windows(app):
        role, name = window.getRoleName(), window.name
        result["windows"].append(name or role)
        if role == "frame":
            result["items"] = listed_items(window)
            result["locked"] = any(n.getRoleName() == "push button" and n.name == "Unlock" and showing(n)
                                   for n in walk(window))
        else:
            result["entries"][name or role] = [text_of(n) for n in walk(window)
                                               if n.getRoleName() in ("text", "password text") and showing(n)]
    return result


def find(predicate, within=None):
    """The first showing element `predicate` accepts, looked for in the topmost window first (a
    dialog's "Close" before the main window's)."""
    app = seahorse()
    if app is None:
        return None
    roots = list(reversed(windows(app))) if within is None else [w for w in windows(app) if w.name == within]
    for root in roots:
        for node in walk(root):
            try:
                if showing(node) and predicate(node):
                    return node
            except Exception:
                continue
    return None


def click(node, times=1):
    extents = node.queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
    x, y = extents.x + extents.width // 2, extents.y + extents.height // 2
    subprocess.run(["xdotool", "mousemove", str(x), str(y), "click", "--repeat", str(times), "--delay", "80", "1"],
                   check=True, timeout=10)


def main(argv):
    command = argv[1]
    if command == "state":
        print(json.dumps(state()))
        return 0
    if command == "click":
        # A row's label is "label\ndescription": its first line names it.
        node = find(lambda n: n.getRoleName() == argv[2] and (n.name or "").split("\n")[0] == argv[3])
        if node is None:
            return 1
        click(node, int(argv[4]) if len(argv) > 4 else 1)
        return 0
    if command == "click-tooltip":
        node = find(lambda n: n.getRoleName() == argv[2] and argv[3] in (n.description or ""))
        if node is None:
            return 1
        click(node)
        return 0
    if command == "fill":
        node = find(lambda n: n.getRoleName() == argv[3], within=argv[2])
        if node is None:
            return 1
        click(node)
        subprocess.run(["xdotool", "key", "ctrl+a", "type", "--delay", "20", argv[4]], check=True, timeout=20)
        return 0 if text_of(node) in (argv[4], "\u25cf" * len(argv[4])) else 1
    if command == "replace":
        # The entry is named by what it shows: a field whose text has not arrived yet (a secret still
        # being read) is not typed into, only to be overwritten when it does.
        node = find(lambda n: n.getRoleName() in ("text", "password text") and text_of(n) == argv[3],
                    within=argv[2])
        if node is None:
            return 1
        click(node)
        subprocess.run(["xdotool", "key", "ctrl+a", "type", "--delay", "20", argv[4]], check=True, timeout=20)
        return 0 if text_of(node) == argv[4] else 1
    if command == "resize":
        found = subprocess.run(["xdotool", "search", "--name", "^seahorse$"], capture_output=True, text=True,
                               timeout=10).stdout.split()
        if not found:
            return 1
        for window in found:
            subprocess.run(["xdotool", "windowsize", window, argv[2], argv[3]], check=True, timeout=10)
        # Done only once the main window has that size: a request made before GTK has settled on its
        # default size is undone, and a narrow window folds (its "+" hidden behind a "Back" button).
        app = seahorse()
        frames = [w for w in windows(app) if w.getRoleName() == "frame"] if app is not None else []
        if not frames:
            return 1
        extents = frames[0].queryComponent().getExtents(pyatspi.DESKTOP_COORDS)
        return 0 if (extents.width, extents.height) == (int(argv[2]), int(argv[3])) else 1
    print("unknown command " + command, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
