import Foundation
import LatchkeyApplications
import XCTest

@testable import LatchkeyAgent

#if canImport(Glibc)
    import Glibc
#endif

/// Flatpak ids from real processes with roots of their own (as root: a mount namespace and a tmpfs
/// root made with unshare, mount and chroot), and the parsers of `/.flatpak-info` and AppArmor labels.
final class SandboxIdentityTests: XCTestCase {
    static let info =
        "[Application]\nname=org.example.Sandboxed\nruntime=runtime/org.example.Platform/x86_64/1\n\n"
        + "[Instance]\ninstance-id=1234567890\n"

    /// Connects to argv[1], then gives itself a root at argv[2] holding a `.flatpak-info` (or, with
    /// "symlink", a symbolic link to argv[4]): in a mount namespace of its own with a tmpfs there
    /// ("sandbox", what bubblewrap does), or by chroot alone in the host's mount namespace ("chroot");
    /// or ("userns") only enters a user namespace of its own.
    static let script = """
        import ctypes, os, socket, sys, time
        libc = ctypes.CDLL(None, use_errno=True)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sys.argv[1])
        root, mode = sys.argv[2], sys.argv[3]
        def check(result, what):
            if result != 0:
                print(what, "failed", ctypes.get_errno(), flush=True)
                sys.exit(1)
        if mode == "userns":
            check(libc.unshare(0x10000000), "unshare")
            print("ready", flush=True)
            sys.stdin.readline()
            sys.exit(0)
        if mode != "chroot":
            check(libc.unshare(0x00020000), "unshare")
            check(libc.mount(None, b"/", None, ctypes.c_ulong(0x4000 | 0x40000), None), "making mounts private")
            check(libc.mount(b"tmpfs", root.encode(), b"tmpfs", ctypes.c_ulong(0), None), "mount")
        if mode == "symlink":
            os.symlink(sys.argv[4], root + "/.flatpak-info")
        else:
            with open(root + "/.flatpak-info", "w") as f:
                f.write(sys.argv[4])
        os.chroot(root)
        os.chdir("/")
        if mode == "sandbox":
            # A neighbour at the same root in a mount namespace of its own (see the first test).
            r, w = os.pipe()
            neighbour = os.fork()
            if neighbour == 0:
                check(libc.unshare(0x00020000), "unshare")
                os.write(w, b"x")
                time.sleep(600)
                os._exit(0)
            os.read(r, 1)
            print("neighbour", neighbour, flush=True)
        print("ready", flush=True)
        sys.stdin.readline()
        """

    /// A client started with `mode` and `last` (see `script`), once it is ready, and its identity.
    private struct Sandboxed {
        let client: ScriptedClient
        let peers: PeerSocket
        let connection: Int32
        let identity: CallerIdentity
        /// In "sandbox" mode: a process at the same root, in a mount namespace of its own.
        let neighbour: pid_t?
    }

    private func sandboxed(_ mode: String, _ last: String) throws -> Sandboxed {
        guard getuid() == 0 else { throw XCTSkip("making mount namespaces and chroots needs root") }
        let peers = try PeerSocket()
        let root = peers.directory + "/root"
        XCTAssertEqual(mkdir(root, 0o755), 0)
        let client = try ScriptedClient(python: Self.script, [peers.path, root, mode, last])
        let connection = try XCTUnwrap(peers.acceptNext())
        var neighbour: pid_t?
        var said = client.line()
        if let line = said, line.hasPrefix("neighbour ") {
            neighbour = pid_t(line.dropFirst(10))
            said = client.line()
        }
        XCTAssertEqual(said, "ready")
        let peer = try XCTUnwrap(PeerCredentials(fd: connection))
        let (identity, _) = CallerIdentification.identify(connection: connection, pid: peer.pid, uid: peer.uid)
        return Sandboxed(
            client: client, peers: peers, connection: connection, identity: identity, neighbour: neighbour)
    }

    /// A process in a mount namespace of its own, at a root of its own holding `/.flatpak-info`: what
    /// a Flatpak sandbox is, and the agent takes its application id. Its executable names nothing.
    func testAProcessInItsOwnMountNamespaceAndRootIsTheFlatpakApplication() throws {
        let sandbox = try sandboxed("sandbox", Self.info)
        defer { close(sandbox.connection) }
        let identity = sandbox.identity
        XCTAssertEqual(identity.flatpakID, "org.example.Sandboxed")
        XCTAssertEqual(identity.doubts, [.otherNamespace("mnt")])
        XCTAssertNil(identity.snapName)

        // Seen from inside (its own namespace and root), it is a host process with a file at the host's
        // `/`, which only root could have put there: no Flatpak application.
        let inside = try XCTUnwrap(Vantage(process: "\(identity.pid)"))
        guard case .running(let process) = PeerProcess.of(connection: sandbox.connection, pid: identity.pid) else {
            return XCTFail("the client is not followed")
        }
        let fromInside = ProcessInspection.identify(
            pid: identity.pid, pidfd: process.descriptor, uid: identity.uid, vantage: inside)
        XCTAssertNil(fromInside.flatpakID)
        XCTAssertEqual(fromInside.doubts, [], "inside, it is where the vantage is")

        // Nor from a neighbour at the same root in a mount namespace of its own: a process that only
        // unshared its mount namespace still sees the host's `/`, and a file root put there.
        let neighbour = try XCTUnwrap(sandbox.neighbour.flatMap { Vantage(process: "\($0)") })
        XCTAssertNotEqual(neighbour.mountNamespace, inside.mountNamespace)
        XCTAssertEqual(neighbour.root, inside.root)
        let fromNeighbour = ProcessInspection.identify(
            pid: identity.pid, pidfd: process.descriptor, uid: identity.uid, vantage: neighbour)
        XCTAssertNil(fromNeighbour.flatpakID)
        XCTAssertEqual(fromNeighbour.doubts, [.otherNamespace("mnt")])
    }

    /// A root of its own in the host's mount namespace (chroot, which a user may do in a user namespace
    /// of its own) is no sandbox: the file there is not trusted.
    func testAChrootInTheHostMountNamespaceIsNoFlatpak() throws {
        let sandbox = try sandboxed("chroot", Self.info)
        defer { close(sandbox.connection) }
        XCTAssertNil(sandbox.identity.flatpakID)
        XCTAssertEqual(sandbox.identity.executable?.path, CallerIdentificationTests.python)
    }

    /// In a user namespace of its own a process may point /proc/PID/exe at any file it can open
    /// (PR_SET_MM_EXE_FILE): its executable names nothing.
    func testAProcessInAnotherUserNamespaceIsDoubted() throws {
        let sandbox = try sandboxed("userns", "")
        defer { close(sandbox.connection) }
        XCTAssertEqual(sandbox.identity.doubts, [.otherNamespace("user")])
        XCTAssertEqual(sandbox.identity.executable?.path, CallerIdentificationTests.python)
        XCTAssertNil(sandbox.identity.flatpakID)
    }

    /// `/.flatpak-info` as a symbolic link to a good file elsewhere is not followed (an absolute target
    /// would be resolved at the agent's root, where the process may have written it).
    func testASymbolicLinkIsNotFollowed() throws {
        let target = NSTemporaryDirectory() + "lk-flatpak-info-\(getpid())"
        XCTAssertTrue(FileManager.default.createFile(atPath: target, contents: Data(Self.info.utf8)))
        defer { unlink(target) }
        let sandbox = try sandboxed("symlink", target)
        defer { close(sandbox.connection) }
        XCTAssertNil(sandbox.identity.flatpakID)
        XCTAssertEqual(sandbox.identity.doubts, [.otherNamespace("mnt")])
    }

    /// A sandbox whose file names no valid application (here: two elements) has no Flatpak id.
    func testAnInvalidApplicationIDIsRefused() throws {
        let sandbox = try sandboxed("sandbox", "[Application]\nname=org.example\n[Instance]\ninstance-id=1\n")
        defer { close(sandbox.connection) }
        XCTAssertNil(sandbox.identity.flatpakID)
    }

    // MARK: Parsers

    func testFlatpakInfoIsReadAsXdgDesktopPortalReadsIt() {
        func id(_ text: String) -> String? { FlatpakInfo(Array(text.utf8))?.applicationID }
        XCTAssertEqual(id(Self.info), "org.example.Sandboxed")
        XCTAssertEqual(
            id("# comment\n[Application]\n  name = org.example.App-1  \n[Instance]\ninstance-id=7\n"),
            "org.example.App-1")
        // The runtime's name when a runtime is the sandbox; the last of a key written twice.
        XCTAssertEqual(
            id(
                "[Application]\nname=org.example.App\n[Runtime]\nname=org.example.Platform\n[Instance]\ninstance-id=1\n"
            ),
            "org.example.Platform")
        XCTAssertEqual(
            id("[Application]\nname=org.a.First\nname=org.a.Second\n[Instance]\ninstance-id=1\n"), "org.a.Second")
        // No instance, no name, a name in another group, a line that is no key file's.
        XCTAssertNil(id("[Application]\nname=org.example.App\n"))
        XCTAssertNil(id("[Instance]\ninstance-id=1\n"))
        XCTAssertNil(id("[Context]\nname=org.example.App\n[Instance]\ninstance-id=1\n"))
        XCTAssertNil(id("[Application]\nname=org.example.App\ngarbage\n[Instance]\ninstance-id=1\n"))
        XCTAssertNil(FlatpakInfo([0x5B, 0xFF, 0x5D]))
    }

    func testFlatpakApplicationIDsFollowFlatpaksRules() {
        for valid in ["org.example.App", "org.gnome.Builder", "io.github.user_name.App-Name", "a.b.c", "A_1.b2.c-d"] {
            XCTAssertTrue(FlatpakInfo.isValidApplicationID(valid), valid)
        }
        for invalid in [
            "", "org.example", "org..example.App", ".org.example.App", "org.example.App.", "org.1example.App",
            "org.ex-ample.App", "org.example.Ap p", "org.example.Äpp", "org/example/App",
            "org.example." + String(repeating: "a", count: 250),
        ] {
            XCTAssertFalse(FlatpakInfo.isValidApplicationID(invalid), invalid)
        }
    }

    func testSnapNamesComeFromEnforcedSnapLabelsOnly() {
        func name(_ label: String) -> String? { SnapLabel.snapName(Array(label.utf8)) }
        XCTAssertEqual(name("snap.firefox.firefox (enforce)\n"), "firefox")
        XCTAssertEqual(name("snap.my-app.daemon (enforce)"), "my-app")
        XCTAssertEqual(name("snap.foo_bar1.App-2 (enforce)\0"), "foo_bar1")
        XCTAssertEqual(name("snap.foo.hook.configure (enforce)\n"), "foo")
        for refused in [
            "unconfined\n", "snap.firefox.firefox (complain)\n", "snap.firefox.firefox\n", "snap.firefox (enforce)",
            "snap.Firefox.firefox (enforce)", "snap.-foo.app (enforce)", "snap.foo--bar.app (enforce)",
            "snap.foo.hook (enforce)", "snap.foo.hook.Bad (enforce)", "snap.foo.app.extra (enforce)",
            "snap.foo_.app (enforce)", "snap.foo_TOOLONGKEY1.app (enforce)", "snap.123.app (enforce)",
            "snap.foo.app//&:ns:other (enforce)", "/usr/bin/foo (enforce)", "snap.foo.app (enforce) ",
            "snap." + String(repeating: "a", count: 41) + ".app (enforce)",
        ] {
            XCTAssertNil(name(refused), refused)
        }
    }
}
