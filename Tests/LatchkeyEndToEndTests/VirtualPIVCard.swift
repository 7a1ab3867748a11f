import Foundation
import XCTest

/// A smart card reader and card for the slot-event tests, made of real parts: pcsc-lite's `pcscd` with
/// the virtual reader driver of `vsmartcard-vpcd` (it listens on TCP port 35963 for a card, on every
/// address: so pcscd runs in a network namespace of its own, with loopback alone, where no other host
/// can reach it and pose as the card; its Unix socket still serves the agent), and a small
/// PIV card written here in Python that connects to it, which OpenSC's `opensc-pkcs11.so` reads through
/// pcscd as it would a YubiKey's PIV application: a token whose serial is the last 8 bytes of its CHUID's
/// GUID, with one certificate (PIV Authentication, CKA_ID 01) and its public key. Connecting the card is
/// inserting it; killing it is removing it. (vsmartcard's own `vicc` has no PIV card, and in Debian 12 its
/// Python package is installed where python3 does not look.)
final class VirtualPIVCard {
    /// Where Debian 12 installs the virtual reader's driver, and its reader.conf.d entry.
    static let driver = "/usr/lib/pcsc/drivers/serial/libifdvpcd.so"
    static let readerConfiguration = "/etc/reader.conf.d/vpcd"
    static let pcscd = "/usr/sbin/pcscd"
    static let python = "/usr/bin/python3"
    static let unshare = "/usr/bin/unshare"
    static let nsenter = "/usr/bin/nsenter"
    static let ip = "/bin/ip"

    /// OpenSC's PKCS#11 module, where the system has it.
    static var openscModule: String? {
        let directory = "/usr/lib"
        let candidates =
            ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).sorted().map {
                "\(directory)/\($0)/opensc-pkcs11.so"
            } + ["/usr/lib/opensc-pkcs11.so"]
        return candidates.first { FileManager.default.fileExists(atPath: $0) }
    }

    /// Skips the test unless the parts are installed and no other pcscd runs (the test starts its own and
    /// stops it; there is one pcscd socket per machine, /run/pcscd/pcscd.comm).
    static func skipUnlessAvailable() throws {
        try XCTSkipUnless(geteuid() == 0, "pcscd and LATCHKEY_TOKENS_CONF need root")
        for (path, package) in [
            (pcscd, "pcscd"), (driver, "vsmartcard-vpcd"), (readerConfiguration, "vsmartcard-vpcd"),
            (python, "python3"), (unshare, "util-linux"), (nsenter, "util-linux"), (ip, "iproute2"),
        ] {
            try XCTSkipUnless(FileManager.default.fileExists(atPath: path), "\(package) is not installed (\(path))")
        }
        try XCTSkipUnless(openscModule != nil, "opensc is not installed (opensc-pkcs11.so)")
        try XCTSkipIf(pcscdRuns(), "a pcscd answers already; the test needs its own, with the virtual reader alone")
    }

    /// Whether something answers on pcscd's socket: a pcscd, or systemd's pcscd.socket that starts one.
    private static func pcscdRuns() -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let path = Array("/run/pcscd/pcscd.comm".utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: path) }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) == 0
            }
        }
    }

    private let directory: String
    private var daemon: Process?
    private var card: Process?

    /// Starts pcscd, in the foreground, with the virtual reader alone, in a network namespace of its own.
    /// (USB readers are still found: pcscd's hotplug does not come from the configuration.)
    init(directory: String) throws {
        self.directory = directory
        let readers = directory + "/reader.conf.d"
        try FileManager.default.createDirectory(atPath: readers, withIntermediateDirectories: false)
        try FileManager.default.copyItem(atPath: Self.readerConfiguration, toPath: readers + "/vpcd")
        try Self.script.write(toFile: directory + "/piv-card.py", atomically: true, encoding: .utf8)
        let daemon = Process()
        daemon.executableURL = URL(fileURLWithPath: Self.unshare)
        // exec: the process the test holds is pcscd itself, so terminating it stops pcscd.
        daemon.arguments = [
            "--net", "/bin/sh", "-c", "\(Self.ip) link set lo up && exec \(Self.pcscd) --foreground --config \"$0\"",
            readers,
        ]
        daemon.standardOutput = FileHandle.nullDevice
        daemon.standardError = FileHandle.nullDevice
        try daemon.run()
        self.daemon = daemon
        // Its socket before the agent's OpenSC looks for it (pcscd makes it once its readers are set up).
        let deadline = Date().addingTimeInterval(10)
        // Its own: another run's pcscd (or a stale socket) would make this one exit on the pid file.
        while !FileManager.default.fileExists(atPath: "/run/pcscd/pcscd.comm") || !Self.isPcscd(daemon) {
            guard Date() < deadline, daemon.isRunning else {
                stop()
                throw NSError(domain: "pcscd", code: 1, userInfo: [NSLocalizedDescriptionKey: "pcscd did not start"])
            }
            usleep(50_000)
        }
    }

    /// Whether pcscd's pid file names `daemon`, the test's own pcscd.
    private static func isPcscd(_ daemon: Process) -> Bool {
        guard daemon.isRunning, let text = try? String(contentsOfFile: "/run/pcscd/pcscd.pid", encoding: .utf8)
        else { return false }
        // pcscd writes "PID\n\0".
        let digits = text.prefix { $0.isNumber }
        return Int32(digits) == daemon.processIdentifier
    }

    /// Inserts a card whose GUID ends with `serial` (16 hex digits) and that holds `certificate` (DER).
    func insert(serial: String, certificate: String) throws {
        guard let daemon else { throw NSError(domain: "pcscd", code: 2) }
        let card = Process()
        // In pcscd's network namespace, where the reader listens; nsenter execs python3 itself.
        card.executableURL = URL(fileURLWithPath: Self.nsenter)
        card.arguments = [
            "--net=/proc/\(daemon.processIdentifier)/ns/net", Self.python, directory + "/piv-card.py", certificate,
            "0011223344556677" + serial,
        ]
        card.standardOutput = FileHandle.nullDevice
        card.standardError = FileHandle.nullDevice
        try card.run()
        self.card = card
    }

    /// Removes the card: its connection to the reader closes with it.
    func remove() {
        guard let card else { return }
        card.terminate()
        card.waitUntilExit()
        self.card = nil
    }

    /// Removes the card and stops pcscd.
    func stop() {
        remove()
        if let daemon, daemon.isRunning {
            daemon.terminate()
            daemon.waitUntilExit()
        }
        daemon = nil
    }

    deinit { stop() }

    /// The card: vpcd's protocol (a 2-byte length, then a control byte or an APDU; the card answers the
    /// ATR request and every APDU) and the PIV commands OpenSC sends to list a card (SELECT of the PIV
    /// application, GET DATA of the CHUID and the certificates, GET RESPONSE for long answers, VERIFY
    /// without a PIN for its state). Anything else is "instruction not supported" or "not found".
    static let script = #"""
        import socket, struct, sys, time

        PIV_AID = bytes.fromhex("A000000308000010000100")

        def tlv(tag, value):
            n = len(value)
            if n < 0x80: length = bytes([n])
            elif n < 0x100: length = bytes([0x81, n])
            else: length = bytes([0x82, n >> 8, n & 0xFF])
            return tag + length + value

        certificate = open(sys.argv[1], "rb").read()
        guid = bytes.fromhex(sys.argv[2])
        objects = {
            bytes.fromhex("5FC102"): tlv(b"\x53", tlv(b"\x34", guid) + tlv(b"\x35", b"20991231")
                                     + tlv(b"\x3E", b"") + tlv(b"\xFE", b"")),
            bytes.fromhex("5FC105"): tlv(b"\x53", tlv(b"\x70", certificate) + tlv(b"\x71", b"\x00")
                                     + tlv(b"\xFE", b"")),
        }
        ATR = bytes.fromhex("3B8880010000000000000000")

        deadline = time.time() + 20
        while True:
            try:
                sock = socket.create_connection(("127.0.0.1", 35963))
                break
            except OSError:
                if time.time() > deadline: raise
                time.sleep(0.1)

        def receive(n):
            data = b""
            while len(data) < n:
                chunk = sock.recv(n - len(data))
                if not chunk: sys.exit(0)
                data += chunk
            return data

        def send(data):
            sock.sendall(struct.pack("!H", len(data)) + data)

        pending = b""
        def reply(data, le):
            global pending
            limit = le if le else 256
            pending = data[limit:]
            if not pending: return data + b"\x90\x00"
            return data[:limit] + bytes([0x61, min(len(pending), 256) & 0xFF])

        while True:
            (size,) = struct.unpack("!H", receive(2))
            message = receive(size)
            if size == 1:
                if message[0] == 4: send(ATR)
                continue
            ins, p1 = message[1], message[2]
            body = message[4:]
            lc = body[0] if len(body) > 1 else 0
            data = body[1:1 + lc] if len(body) > 1 else b""
            le = body[-1] if len(body) == 1 or len(body) > 1 + lc else 0
            if ins == 0xA4 and p1 == 0x04:
                if data and (PIV_AID.startswith(data) or data.startswith(PIV_AID[:5])):
                    send(reply(tlv(b"\x61", tlv(b"\x4F", PIV_AID) + tlv(b"\x79", tlv(b"\x4F", PIV_AID[:5]))), le))
                else:
                    send(b"\x6A\x82")
            elif ins == 0xCB and data[:1] == b"\x5C":
                tag = data[2:2 + data[1]]
                send(reply(objects[tag], le) if tag in objects else b"\x6A\x82")
            elif ins == 0xC0:
                send(reply(pending, le))
            elif ins == 0x20:
                send(b"\x63\xC3")
            else:
                send(b"\x6D\x00")
        """#
}
