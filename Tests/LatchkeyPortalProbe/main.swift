// latchkey-portal-probe: calls the Secret portal's backend (org.freedesktop.impl.portal.Secret) on the
// Secret Service's connection as xdg-desktop-portal does, for the portal tests (docs/PORTAL.md).
//
// PortalTests install a root-owned copy of it with an application file granting
// Privileges=PortalSecrets, so that the agent takes it for xdg-desktop-portal. One call per run; one
// line of output:
//
//   latchkey-portal-probe ADDRESS APP_ID [--own-name] [--fd=KIND] [--token=VALUE | --bad-token]
//     -> response=N bytes=HEX eof=yes|no     (the reply, and what the descriptor delivered)
//     -> error=NAME                          (an error reply, or a failure here)
//
// --own-name  first take org.freedesktop.portal.Desktop, as the real portal owns it
// --fd=pipe   the write end of a fresh pipe (libsecret's way; the default)
// --fd=socket one end of a socket pair (ashpd's way)
// --fd=full   the write end of a pipe filled to the brim and blocking again: it never drains
// --fd=file   a regular file; --fd=read the read end of a pipe; --fd=null /dev/null
// --fd=spliced the write end of a pipe whose lock a child holds: it splices into the pipe from an empty
//             socket, so any write to the pipe waits in the kernel, uninterruptibly, until the child is
//             killed (when this program exits)
//
//   latchkey-portal-probe ADDRESS --frontend
//     -> response=N bytes=HEX eof=yes|no
//
// --frontend  be the sandboxed application instead: call xdg-desktop-portal's own
//             org.freedesktop.portal.Secret.RetrieveSecret with a pipe, as libsecret does, and wait for
//             the request's Response (PortalTests run it in a fake Flatpak sandbox)
import Foundation
import LatchkeyDBus

#if canImport(Glibc)
    import Glibc
#endif

func fail(_ name: String) -> Never {
    print("error=\(name)")
    exit(1)
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 2 else { fail("usage") }
let address = arguments[0]
let appID = arguments[1]
var ownName = false
var kind = "pipe"
var options: [(BusValue, BusValue)] = []
for option in arguments.dropFirst(2) {
    if option == "--own-name" {
        ownName = true
    } else if option.hasPrefix("--fd=") {
        kind = String(option.dropFirst(5))
    } else if option.hasPrefix("--token=") {
        options.append((.string("token"), .variant(.string(String(option.dropFirst(8))))))
    } else if option == "--bad-token" {
        options.append((.string("token"), .variant(.uint32(7))))
    } else {
        fail("usage")
    }
}

/// The child holding a spliced pipe's lock (`--fd=spliced`), killed when this program exits.
nonisolated(unsafe) var splicer: pid_t = 0

/// The descriptor to pass and the one to read the secret from (nil: nothing to read).
func descriptors(_ kind: String) -> (pass: Int32, read: Int32?) {
    var pair: [Int32] = [-1, -1]
    switch kind {
    case "pipe", "read":
        guard pipe(&pair) == 0 else { fail("pipe") }
        return kind == "pipe" ? (pair[1], pair[0]) : (pair[0], pair[1])
    case "socket":
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            fail("socketpair")
        }
        return (pair[1], pair[0])
    case "full":
        guard pipe(&pair) == 0 else { fail("pipe") }
        _ = fcntl(pair[1], F_SETFL, fcntl(pair[1], F_GETFL) | O_NONBLOCK)
        let chunk = [UInt8](repeating: 0x55, count: 4096)
        while write(pair[1], chunk, chunk.count) > 0 {}
        guard errno == EAGAIN else { fail("fill") }
        // Blocking again, as a client's pipe would be: a blocking write to it would never return.
        _ = fcntl(pair[1], F_SETFL, fcntl(pair[1], F_GETFL) & ~O_NONBLOCK)
        return (pair[1], nil)
    case "file":
        let path = "/tmp/latchkey-portal-probe.\(getpid())"
        let fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { fail("tmpfile") }
        unlink(path)
        return (fd, nil)
    case "null":
        return (open("/dev/null", O_WRONLY | O_CLOEXEC), nil)
    case "spliced":
        var sockets: [Int32] = [-1, -1]
        guard pipe(&pair) == 0, socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &sockets) == 0 else {
            fail("pipe")
        }
        // Python's os.splice: holds the pipe's lock while it waits for the socket, which never gets
        // anything. The two descriptors are inherited (made without close-on-exec).
        var child: pid_t = 0
        let script = "import os, sys; os.splice(int(sys.argv[1]), int(sys.argv[2]), 64)"
        let words: [String] = ["python3", "-I", "-c", script, "\(sockets[0])", "\(pair[1])"]
        let argv: [UnsafeMutablePointer<CChar>?] = words.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        guard posix_spawn(&child, "/usr/bin/python3", nil, nil, argv, environ) == 0 else { fail("spawn") }
        splicer = child
        atexit { if splicer > 0 { kill(splicer, SIGKILL) } }
        // Until the child is in splice (it shows as sleeping in the kernel), a write would not wait.
        let deadline = Date().addingTimeInterval(5)
        while Date() < deadline {
            let stat = (try? String(contentsOfFile: "/proc/\(child)/wchan", encoding: .utf8)) ?? ""
            if !stat.isEmpty && stat != "0" { break }
            usleep(10_000)
        }
        usleep(50_000)
        return (pair[1], nil)
    default:
        fail("usage")
    }
}

/// What `fd` delivers until its end, waiting at most 5 s in all.
func readToEnd(_ fd: Int32) -> (bytes: [UInt8], eof: Bool) {
    var bytes: [UInt8] = []
    let deadline = Date().addingTimeInterval(5)
    var buffer = [UInt8](repeating: 0, count: 4096)
    while bytes.count < 65536 {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let left = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
        guard poll(&poller, 1, left) > 0 else { return (bytes, false) }
        let count = read(fd, &buffer, buffer.count)
        if count == 0 { return (bytes, true) }
        if count < 0 { return (bytes, false) }
        bytes += buffer[0..<count]
    }
    return (bytes, false)
}

/// The `Response` of a frontend request, set on the loop thread.
final class Answer: @unchecked Sendable {
    private let lock = NSLock()
    private var value: UInt32?
    func set(_ response: UInt32) { lock.withLock { value = response } }
    var response: UInt32? { lock.withLock { value } }
}

/// The application's side (`--frontend`): what libsecret does in a sandbox.
func frontend(_ connection: BusConnection) throws -> String {
    var pair: [Int32] = [-1, -1]
    guard pipe(&pair) == 0 else { fail("pipe") }
    let (readEnd, writeEnd) = (pair[0], pair[1])
    let sender = String(connection.uniqueName.dropFirst()).replacingOccurrences(of: ".", with: "_")
    let request = "/org/freedesktop/portal/desktop/request/\(sender)/probe"
    let answer = Answer()
    try connection.sync { bus in
        _ = try bus.addMatch(
            Bus.signalRule(path: request, interface: "org.freedesktop.portal.Request", member: "Response")
        ) { message in
            if case .uint32(let response)? = (try? message.arguments())?.first { answer.set(response) }
        }
    }
    let handle = try connection.sync { bus in
        try bus.call(
            destination: "org.freedesktop.portal.Desktop", path: "/org/freedesktop/portal/desktop",
            interface: "org.freedesktop.portal.Secret", member: "RetrieveSecret",
            [
                .unixFD(writeEnd),
                .dictionary(keyType: "s", valueType: "v", [(.string("handle_token"), .variant(.string("probe")))]),
            ], timeout: .seconds(10)
        ).arguments().first?.string
    }
    close(writeEnd)
    guard handle == request else { fail("handle \(handle ?? "none")") }
    let deadline = Date().addingTimeInterval(10)
    while answer.response == nil && Date() < deadline { usleep(10_000) }
    guard let response = answer.response else { fail("no-response") }
    let (bytes, eof) = readToEnd(readEnd)
    return "response=\(response) bytes=\(bytes.map { String(format: "%02x", $0) }.joined()) eof=\(eof ? "yes" : "no")"
}

do {
    let connection = try BusConnection(.address(address))
    if appID == "--frontend" {
        print(try frontend(connection))
        connection.close()
        exit(0)
    }
    if ownName {
        try connection.sync { bus in _ = try bus.requestName("org.freedesktop.portal.Desktop") }
    }
    let (pass, readEnd) = descriptors(kind)
    let body = options
    let reply = try connection.sync { bus in
        try bus.call(
            destination: "org.freedesktop.secrets", path: "/org/freedesktop/portal/desktop",
            interface: "org.freedesktop.impl.portal.Secret", member: "RetrieveSecret",
            [
                .objectPath("/org/freedesktop/portal/desktop/request/1_1/probe"), .string(appID), .unixFD(pass),
                .dictionary(keyType: "s", valueType: "v", body),
            ], timeout: .seconds(10)
        ).arguments()
    }
    // The message carried a duplicate; this copy closes so that the reader sees the end.
    close(pass)
    guard reply.count == 2, case .uint32(let response) = reply[0] else { fail("reply") }
    var line = "response=\(response)"
    if let readEnd {
        let (bytes, eof) = readToEnd(readEnd)
        line += " bytes=\(bytes.map { String(format: "%02x", $0) }.joined()) eof=\(eof ? "yes" : "no")"
    }
    print(line)
    connection.close()
} catch let error as BusError {
    fail(error.name)
} catch {
    fail("\(error)")
}
