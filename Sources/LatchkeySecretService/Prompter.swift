import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

/// Asks for the keychain password through an external program that speaks the pinentry (Assuan)
/// protocol (docs/SECRET-SERVICE.md §5): `pinentry` by default, or the command given with
/// `--prompter` / `LATCHKEY_PROMPTER`.
package struct PinentryPrompter: Sendable {
    /// The program and its arguments (no shell).
    package let command: [String]
    /// How long the user (or the program) has for each answer.
    package let timeoutSeconds: Int
    /// Password attempts before giving up.
    package static let attempts = 3

    package init(command: [String], timeoutSeconds: Int = 120) {
        self.command = command.isEmpty ? ["pinentry"] : command
        self.timeoutSeconds = timeoutSeconds
    }

    /// A command line split on spaces and tabs (no quoting, no shell).
    package init(commandLine: String) {
        self.init(command: commandLine.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init))
    }

    package enum Outcome: Sendable, Equatable {
        /// `verify` accepted a password.
        case accepted
        /// Every attempt was a wrong password.
        case rejected
        /// The user cancelled, or the prompt was dismissed.
        case cancelled
        /// The program could not be run or misbehaved; the text says how.
        case failed(String)
    }

    /// Runs one prompt: asks up to `attempts` times, calling `verify` with each password (on this
    /// thread), until it returns true. Blocks; `cancellation` ends it from another thread.
    /// `busAddress` is the bus the service runs on, handed to the prompter as
    /// `DBUS_SESSION_BUS_ADDRESS` (nil: the agent's own variable, if any).
    func run(
        description: String, cancellation: PromptCancellation, busAddress: String? = nil,
        verify: (SecretBytes) -> Bool
    ) -> Outcome {
        let channel: PinentryChannel
        do {
            channel = try PinentryChannel(
                command: command, timeoutSeconds: timeoutSeconds, cancellation: cancellation,
                environment: PrompterEnvironment.current(busAddress: busAddress))
        } catch {
            return cancellation.isCancelled ? .cancelled : .failed(error.message)
        }
        defer { channel.close() }
        do {
            try channel.expectOK()  // the greeting
            try channel.command("SETTITLE latchkey")
            try channel.command("SETDESC " + Assuan.escape(description))
            try channel.command("SETPROMPT Password:")
            for attempt in 1...Self.attempts {
                if attempt > 1 {
                    try channel.command(
                        "SETERROR " + Assuan.escape("Wrong password (attempt \(attempt) of \(Self.attempts))"))
                }
                guard let password = try channel.getPin() else { return .cancelled }
                if verify(password) { return .accepted }
            }
            return .rejected
        } catch {
            return cancellation.isCancelled ? .cancelled : .failed(error.message)
        }
    }
}

struct PrompterError: Error {
    let message: String
    /// The program did not answer in time (the user check's timeout, docs/ACCESS-CONTROL.md §4).
    var timedOut = false
}

/// Percent-escaping of the Assuan protocol.
enum Assuan {
    /// `escape(text)` cut at a character so that it takes at most `maximumBytes` UTF-8 bytes: Assuan
    /// lines are at most 1,000 bytes, and pinentry exits on a longer one (a long non-ASCII prompt, whose
    /// `%` triple when escaped, would otherwise cost the check).
    static func escape(_ text: String, maximumBytes: Int) -> String {
        var out = ""
        var bytes = 0
        for scalar in text.unicodeScalars {
            let piece = escape(String(scalar))
            guard bytes + piece.utf8.count <= maximumBytes else { break }
            out += piece
            bytes += piece.utf8.count
        }
        return out
    }

    static func escape(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "%": out += "%25"
            case "\n": out += "%0A"
            case "\r": out += "%0D"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// Decodes `%XX` escapes in place of a data line's payload.
    static func unescape(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var k = bytes.startIndex
        while k < bytes.endIndex {
            if bytes[k] == 0x25, k + 2 < bytes.endIndex, let high = hex(bytes[k + 1]), let low = hex(bytes[k + 2]) {
                out.append(high << 4 | low)
                k += 3
            } else {
                out.append(bytes[k])
                k += 1
            }
        }
        return out
    }

    private static func hex(_ c: UInt8) -> UInt8? {
        switch c {
        case 0x30...0x39: c - 0x30
        case 0x41...0x46: c - 0x41 + 10
        case 0x61...0x66: c - 0x61 + 10
        default: nil
        }
    }
}

/// One pinentry process, talked to over a socket pair (so a vanished program is an error on send,
/// never a SIGPIPE for the agent). Also the agent's user checks' (`PinentryConversation`).
final class PinentryChannel {
    static let maxLine = 65_536
    static let chunk = 4096

    private let fd: Int32
    private let pid: pid_t
    private let timeoutSeconds: Int
    private let cancellation: PromptCancellation
    private var buffer: [UInt8] = []

    init(
        command: [String], timeoutSeconds: Int, cancellation: PromptCancellation,
        environment: [String]
    ) throws(PrompterError) {
        self.timeoutSeconds = timeoutSeconds
        self.cancellation = cancellation
        // Never reallocated (it holds at most maxLine bytes and one chunk), so no copy of a password
        // line is left behind in freed memory.
        buffer.reserveCapacity(Self.maxLine + Self.chunk)
        var pair: [Int32] = [-1, -1]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &pair) == 0 else {
            throw PrompterError(message: "socketpair: \(String(cString: strerror(errno)))")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, pair[1], 0)
        posix_spawn_file_actions_adddup2(&actions, pair[1], 1)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        var argv: [UnsafeMutablePointer<CChar>?] = command.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer { for pointer in envp { free(pointer) } }
        var child: pid_t = 0
        // posix_spawnp searches the agent's PATH; the program itself sees only `environment`.
        let spawned = posix_spawnp(&child, command[0], &actions, nil, &argv, &envp)
        Glibc.close(pair[1])
        guard spawned == 0 else {
            Glibc.close(pair[0])
            throw PrompterError(
                message: "cannot run the prompter '\(command[0])': \(String(cString: strerror(spawned)))")
        }
        fd = pair[0]
        pid = child
        // Already dismissed: `started` has stopped it.
        cancellation.started(child)
    }

    func close() {
        // The read buffer may hold the password line: wipe it however the prompter ends.
        defer { SecretBytes.wipe(&buffer) }
        _ = try? send("BYE")
        Glibc.close(fd)
        // Give it a moment to exit on its own, then make sure. It stays unreaped until `reap`, so
        // its pid cannot be given to another process while anyone may still signal it.
        for _ in 0..<50 {
            if PrompterProcess.hasExited(pid) { break }
            usleep(20_000)
        }
        if !PrompterProcess.hasExited(pid) {
            cancellation.signal(SIGKILL)
            PrompterProcess.waitForExit(pid)
        }
        cancellation.reap()
    }

    func command(_ line: String) throws(PrompterError) {
        try send(line)
        try expectOK()
    }

    /// GETPIN: the password, or nil when the user cancelled.
    func getPin() throws(PrompterError) -> SecretBytes? {
        try send("GETPIN")
        var password: [UInt8] = []
        // Never reallocated (a line is at most maxLine bytes), so no copy is left behind unwiped.
        password.reserveCapacity(Self.maxLine)
        defer { SecretBytes.wipe(&password) }
        while true {
            var line = try readLine()
            defer { SecretBytes.wipe(&line) }
            if line.starts(with: Array("D ".utf8)) {
                var decoded = Assuan.unescape(line[2...])
                defer { SecretBytes.wipe(&decoded) }
                guard password.count + decoded.count <= Self.maxLine else {
                    throw PrompterError(message: "the prompter sent an over-long password")
                }
                password += decoded
            } else if line == Array("OK".utf8) || line.starts(with: Array("OK ".utf8)) {
                return SecretBytes(consuming: &password)
            } else if line.starts(with: Array("ERR".utf8)) {
                // GPG_ERR_CANCELED (and its timeout sibling) is the user saying no; anything else is the
                // program failing (no terminal, no display) and is worth a line in the log.
                let text = String(decoding: line.prefix(200), as: UTF8.self)
                if text.hasPrefix("ERR 83886179") || text.hasPrefix("ERR 83886142") { return nil }
                throw PrompterError(message: "the prompter could not ask: \(text)")
            } else if line.starts(with: Array("S ".utf8)) || line.starts(with: Array("#".utf8)) {
                continue
            } else {
                throw PrompterError(message: "the prompter answered GETPIN unexpectedly")
            }
        }
    }

    /// CONFIRM: true when the user chose OK, false when they cancelled (or closed the prompt).
    func confirm() throws(PrompterError) -> Bool {
        try send("CONFIRM")
        while true {
            let line = try readLine()
            if line == Array("OK".utf8) || line.starts(with: Array("OK ".utf8)) { return true }
            if line.starts(with: Array("S ".utf8)) || line.starts(with: Array("#".utf8)) { continue }
            let text = String(decoding: line.prefix(200), as: UTF8.self)
            // GPG_ERR_CANCELED and GPG_ERR_NOT_CONFIRMED are the user saying no; GPG_ERR_TIMEOUT nobody
            // answering, which is no as well.
            if text.hasPrefix("ERR 83886179") || text.hasPrefix("ERR 83886142") || text.hasPrefix("ERR 83886194") {
                return false
            }
            throw PrompterError(message: "the prompter could not ask: \(text)")
        }
    }

    func expectOK() throws(PrompterError) {
        while true {
            let line = try readLine()
            if line == Array("OK".utf8) || line.starts(with: Array("OK ".utf8)) { return }
            if line.starts(with: Array("S ".utf8)) || line.starts(with: Array("#".utf8)) { continue }
            let text = String(decoding: line.prefix(200), as: UTF8.self)
            throw PrompterError(message: "the prompter refused a command: \(text)")
        }
    }

    private func send(_ line: String) throws(PrompterError) {
        var bytes = Array(line.utf8) + [0x0A]
        defer { SecretBytes.wipe(&bytes) }
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { raw in
                Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                throw PrompterError(message: "the prompter went away")
            }
            offset += sent
        }
    }

    private func readLine() throws(PrompterError) -> [UInt8] {
        var deadline = timespec()
        clock_gettime(CLOCK_MONOTONIC, &deadline)
        let end = deadline.tv_sec + timeoutSeconds
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[..<newline])
                // Overwrite the consumed bytes before dropping them: they may be a password.
                for k in 0...newline { buffer[k] = 0 }
                buffer.removeFirst(newline + 1)
                return line
            }
            guard buffer.count < Self.maxLine else {
                throw PrompterError(message: "the prompter sent an over-long line")
            }
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            guard now.tv_sec < end else {
                throw PrompterError(message: "the prompter did not answer within \(timeoutSeconds) s", timedOut: true)
            }
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, 1000)
            if ready < 0 && errno != EINTR { throw PrompterError(message: "poll: \(String(cString: strerror(errno)))") }
            if ready <= 0 { continue }
            var chunk = [UInt8](repeating: 0, count: Self.chunk)
            let count = read(fd, &chunk, chunk.count)
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else {
                SecretBytes.wipe(&chunk)
                throw PrompterError(message: "the prompter exited")
            }
            buffer += chunk[0..<count]
            SecretBytes.wipe(&chunk)
        }
    }
}
