import Foundation
import LatchkeyTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// `latchkeyd` run directly by a test (not started by the library), and a starter that gives the agent
/// a descriptor limit of its own.
enum AgentProcesses {
    /// Starts `latchkeyd --no-desktop --no-secret-service` in the foreground with this process's
    /// environment changed by `environment` (a nil value removes the variable), standard error to
    /// `logPath`; returns its pid. posix_spawn rather than Foundation's Process, whose reaper may block
    /// in waitpid on another child and never see this one exit.
    static func spawn(environment changes: [String: String?], logPath: String) throws -> pid_t {
        let executable = TestProcess.binDirectory + "/latchkeyd"
        var environment = ProcessInfo.processInfo.environment
        for (name, value) in changes { environment[name] = value }
        let arguments = [executable, "--no-desktop", "--no-secret-service"]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, logPath, O_WRONLY | O_CREAT | O_APPEND, 0o600)
        let argv = arguments.map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { for pointer in argv + envp { free(pointer) } }
        var pid = pid_t()
        let spawned = posix_spawn(&pid, executable, &actions, nil, argv, envp)
        guard spawned == 0 else {
            throw XCTSkip("cannot start latchkeyd: \(String(cString: strerror(spawned)))")
        }
        return pid
    }

    /// Waits at most `seconds` for the child `pid` to exit (and reaps it); kills it when it does not.
    /// Returns whether it exited by itself.
    static func waitForChild(_ pid: pid_t, within seconds: Double) -> Bool {
        var status: Int32 = 0
        let exited = Poll.until(within: seconds, every: 0.05) { waitpid(pid, &status, WNOHANG) == pid }
        if !exited {
            kill(pid, SIGKILL)
            waitpid(pid, &status, 0)
        }
        return exited
    }

    /// A script that runs the built `latchkeyd` with a hard and soft limit of `descriptors` open files
    /// (prlimit(1)), written into `directory`: set LATCHKEYD to it and the library starts agents with
    /// that limit. The limit must be hard too, or the agent raises its soft limit at start.
    static func starter(descriptorLimit descriptors: Int, in directory: String) throws -> String {
        let prlimit = "/usr/bin/prlimit"
        try XCTSkipUnless(FileManager.default.isExecutableFile(atPath: prlimit), "prlimit(1) is not installed")
        let path = directory + "/latchkeyd-nofile-\(descriptors)"
        let script = """
            #!/bin/sh
            exec \(prlimit) --nofile=\(descriptors):\(descriptors) \(TestProcess.binDirectory)/latchkeyd "$@"

            """
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o755)
        return path
    }
}
