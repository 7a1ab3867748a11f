import CSystemd
import Foundation
import LatchkeyTestSupport
import XCTest

@testable import LatchkeyDBus

#if canImport(Glibc)
    import Glibc
#endif

/// `GetConnectionCredentials` as the bus daemon answers it, and, since Debian 12's daemon sends no
/// `ProcessFD`, an answer with one (and with keys and types to skip) from a service on the same bus.
final class ConnectionCredentialsTests: XCTestCase {
    private var daemon: PrivateBus!

    override func setUpWithError() throws {
        daemon = try PrivateBus(system: false)
    }

    override func tearDown() {
        daemon?.stop()
        daemon = nil
    }

    func testTheDaemonsAnswerNamesThisProcess() throws {
        let client = try BusConnection(.address(daemon.address))
        defer { client.close() }
        let (uid, pid) = try client.sync { bus in
            let credentials = try bus.connectionCredentials(of: bus.uniqueName)
            return (credentials.uid, credentials.pid)
        }
        XCTAssertEqual(uid, getuid())
        XCTAssertEqual(pid, UInt32(getpid()))
    }

    /// A reply carrying `ProcessFD` (here a pipe's read end): the descriptor is a duplicate the object
    /// owns and closes; a label loses its NUL; other keys, and known keys with other types, are skipped.
    func testAProcessFDIsDuplicatedAndOtherEntriesAreSkipped() throws {
        var pipeEnds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&pipeEnds), 0)
        defer { for end in pipeEnds { close(end) } }
        let sent = pipeEnds[0]
        let service = try BusConnection(.address(daemon.address))
        defer { service.close() }
        try service.sync { bus in
            try bus.addObject(path: "/creds") { call in
                guard call.member == "Get" else { return .notHandled }
                try Self.replyWithCredentials(call, descriptor: sent)
                return .handled
            }
            _ = try bus.requestName("org.example.Creds")
        }
        let client = try BusConnection(.address(daemon.address))
        defer { client.close() }
        let (uid, pid, label, duplicate) = try client.sync { bus in
            let reply = try bus.call(
                destination: "org.example.Creds", path: "/creds", interface: "org.example.Creds", member: "Get")
            let credentials = try ConnectionCredentials(reply: reply)
            let descriptor = try XCTUnwrap(credentials.processFD)
            var mine = stat(), theirs = stat()
            XCTAssertEqual(fstat(descriptor, &mine), 0)
            XCTAssertEqual(fstat(sent, &theirs), 0)
            XCTAssertEqual(mine.st_ino, theirs.st_ino, "not the descriptor sent")
            XCTAssertEqual(fcntl(descriptor, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC)
            return (credentials.uid, credentials.pid, credentials.securityLabel, descriptor)
        }
        XCTAssertEqual(uid, 1000)
        XCTAssertEqual(pid, 4242)
        XCTAssertEqual(label, Array("snap.example.app (enforce)".utf8))
        // Closed with the object.
        XCTAssertEqual(fcntl(duplicate, F_GETFD), -1)
    }

    /// `a{sv}`: UnixUserID 1000, a ProcessID with the wrong type, ProcessID 4242, an unknown key,
    /// ProcessFD, LinuxSecurityLabel with its NUL.
    private static func replyWithCredentials(_ call: BusMessage, descriptor: Int32) throws {
        var raw: OpaquePointer?
        try check(sd_bus_message_new_method_return(call.pointer, &raw), "reply")
        let reply = BusMessage(adopting: raw!)
        let message = reply.pointer
        func type(_ scalar: Unicode.Scalar) -> CChar { CChar(UInt8(ascii: scalar)) }
        func entry(_ key: String, _ signature: String, _ append: () throws -> Void) throws {
            try check(sd_bus_message_open_container(message, type("e"), "sv"), "entry")
            try check(key.withCString { sd_bus_message_append_basic(message, type("s"), $0) }, "key")
            try check(sd_bus_message_open_container(message, type("v"), signature), "variant")
            try append()
            try check(sd_bus_message_close_container(message), "variant")
            try check(sd_bus_message_close_container(message), "entry")
        }
        func number(_ value: UInt32) throws {
            var value = value
            try check(sd_bus_message_append_basic(message, type("u"), &value), "u")
        }
        try check(sd_bus_message_open_container(message, type("a"), "{sv}"), "array")
        try entry("UnixUserID", "u") { try number(1000) }
        try entry("ProcessID", "s") {
            try check("nope".withCString { sd_bus_message_append_basic(message, type("s"), $0) }, "s")
        }
        try entry("ProcessID", "u") { try number(4242) }
        try entry("Unknown", "as") {
            try check(sd_bus_message_open_container(message, type("a"), "s"), "as")
            try check("x".withCString { sd_bus_message_append_basic(message, type("s"), $0) }, "s")
            try check(sd_bus_message_close_container(message), "as")
        }
        try entry("ProcessFD", "h") {
            var fd = descriptor
            try check(sd_bus_message_append_basic(message, type("h"), &fd), "h")
        }
        try entry("LinuxSecurityLabel", "ay") {
            let label = Array("snap.example.app (enforce)\0".utf8)
            try check(
                label.withUnsafeBytes { sd_bus_message_append_array(message, type("y"), $0.baseAddress, $0.count) },
                "ay")
        }
        try check(sd_bus_message_close_container(message), "array")
        try check(sd_bus_send(nil, message, nil), "send")
    }
}
