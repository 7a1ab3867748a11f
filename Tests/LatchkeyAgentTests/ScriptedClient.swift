import Foundation
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// A real client process for the identification tests: a few lines of Python (or another program)
/// started with exactly the environment given, in a process group of its own (so that it and any
/// process it forks are killed together), talking to the test over two pipes: lines in on its
/// standard input, lines out on its standard output.
final class ScriptedClient {
    let pid: pid_t
    private let input: Int32
    private let output: Int32
    private var buffered: [UInt8] = []
    private var reaped = false

    /// Starts `executable` with `arguments` (argv[0] included) and `environment` (`NAME=value`).
    init(_ executable: String, _ arguments: [String], environment: [String] = ["PATH=/usr/bin:/bin"]) throws {
        var toChild: [Int32] = [-1, -1], fromChild: [Int32] = [-1, -1]
        guard pipe(&toChild) == 0, pipe(&fromChild) == 0 else { throw NSError(domain: "ScriptedClient", code: 1) }
        for fd in toChild + fromChild { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        posix_spawn_file_actions_adddup2(&actions, toChild[0], 0)
        posix_spawn_file_actions_adddup2(&actions, fromChild[1], 1)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP))
        posix_spawnattr_setpgroup(&attributes, 0)
        let argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        let envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        posix_spawn_file_actions_destroy(&actions)
        posix_spawnattr_destroy(&attributes)
        close(toChild[0])
        close(fromChild[1])
        guard spawned == 0 else {
            close(toChild[1])
            close(fromChild[0])
            throw NSError(domain: "ScriptedClient", code: Int(spawned))
        }
        self.pid = pid
        input = toChild[1]
        output = fromChild[0]
    }

    /// A Python script run with `/usr/bin/python3 -I -c`, with `arguments` after it.
    convenience init(python script: String, _ arguments: [String], environment: [String] = ["PATH=/usr/bin:/bin"])
        throws
    {
        try self.init("/usr/bin/python3", ["python3", "-I", "-c", script] + arguments, environment: environment)
    }

    deinit {
        if !reaped { killAndReap() }
        close(input)
        close(output)
    }

    /// Kills the client (and its process group) and reaps it now: its pid is free for another process.
    func killAndReap() {
        kill(-pid, SIGKILL)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        reaped = true
    }

    /// Writes `line` and a newline to the client's standard input.
    func send(_ line: String = "go") {
        let bytes = Array((line + "\n").utf8)
        _ = bytes.withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
    }

    /// The next line the client prints, waiting at most `seconds`; nil when none comes.
    func line(within seconds: Double = 10) -> String? {
        let end = ContinuousClock.now + .seconds(seconds)
        while true {
            if let newline = buffered.firstIndex(of: 10) {
                let line = String(decoding: buffered[..<newline], as: UTF8.self)
                buffered.removeFirst(newline + 1)
                return line
            }
            let left = ContinuousClock.now.duration(to: end)
            guard left > .zero else { return nil }
            var ready = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, Int32(left.components.seconds * 1000 + 10)) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 512)
            let count = read(output, &chunk, chunk.count)
            guard count > 0 else { return nil }
            buffered += chunk[0..<count]
        }
    }

    /// The line the client prints next, failing the test when it is not `expected`.
    func expect(_ expected: String, file: StaticString = #filePath, line lineNumber: UInt = #line) {
        let got = line()
        XCTAssertEqual(got, expected, "the client said something else", file: file, line: lineNumber)
    }

    /// The executable `/proc/PID/exe` of `process` names now.
    static func executable(of process: pid_t) -> String? {
        var buffer = [CChar](repeating: 0, count: 4096)
        let count = readlink("/proc/\(process)/exe", &buffer, buffer.count - 1)
        return count > 0 ? String(decoding: buffer[0..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
    }

    /// Waits until `process` runs `path` (after an `exec`); returns whether it did within 10 s.
    static func waitUntil(_ process: pid_t, runs path: String) -> Bool {
        PeerSocket.within(10) { executable(of: process) == path }
    }
}

extension PeerSocket {
    /// The socket's path, for the clients' argument.
    var path: String { directory + "/s.sock" }

    /// Accepts the next connection (waiting at most 10 s); nil when none comes.
    func acceptNext() -> Int32? {
        var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
        guard poll(&ready, 1, 10_000) > 0 else { return nil }
        let connection = accept(listener, nil, nil)
        guard connection >= 0 else { return nil }
        _ = fcntl(connection, F_SETFD, FD_CLOEXEC)
        return connection
    }
}
