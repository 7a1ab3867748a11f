import Foundation
import LatchkeyDBus
import XCTest

@testable import LatchkeySecretService

/// The prompter's hygiene (docs/SECRET-SERVICE.md §5): the environment it runs with, and that a
/// cancel can only ever signal the prompter itself.
final class PrompterTests: SecretServiceTestCase {
    /// Variables every program may get from its shell or from the kernel, whatever we pass.
    private static let shellVariables: Set<String> = ["PWD", "SHLVL", "_", "OLDPWD"]

    func testThePrompterGetsOnlyWhatAPinentryNeeds() throws {
        // The agent starts with this environment (the library passes its own on).
        let planted = [
            "DISPLAY": ":42", "XAUTHORITY": "/tmp/xauth-test", "LANG": "C.UTF-8", "LC_TIME": "C",
            "GPG_TTY": "/dev/pts/42", "TERM": "xterm", "SSH_AUTH_SOCK": "/tmp/agent.leak",
            "LATCHKEY_TEST_SECRET": "must not reach the prompter", "LD_PRELOAD": "",
        ]
        for (name, value) in planted { setenv(name, value, 1) }
        defer { for name in planted.keys { unsetenv(name) } }
        // A prompter that records its environment, then answers like the file prompter.
        let dump = base + "/prompter.env"
        let wrapper = base + "/recording-prompter"
        try """
        #!/bin/sh
        env > "\(dump)"
        exec "\(Self.prompter)"
        """.write(toFile: wrapper, atomically: true, encoding: .utf8)
        chmod(wrapper, 0o755)
        setenv("LATCHKEY_PROMPTER", wrapper, 1)

        try createKeychain()
        XCTAssertEqual(try cli(["lock"]).status, 0)
        let client = try SecretServiceClient(bus.address)
        try client.watchSignals()
        let reply = try client.call(
            SSPath.service, SSPath.serviceInterface, "Unlock",
            [.array(elementType: "o", [.objectPath(SSPath.login)])])
        let prompt = try XCTUnwrap(reply.last?.string)
        try client.call(prompt, SSPath.promptInterface, "Prompt", [.string("")])
        let done = try XCTUnwrap(client.signals.wait(timeout: 20) { $0.path == prompt && $0.member == "Completed" })
        XCTAssertEqual(done.arguments.first, .boolean(false), "unlocked through the recording prompter:\n\(agentLog())")

        var environment: [String: String] = [:]
        for line in try String(contentsOfFile: dump, encoding: .utf8).split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            environment[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        for name in ["DISPLAY", "XAUTHORITY", "LANG", "LC_TIME", "GPG_TTY", "TERM"] {
            XCTAssertEqual(environment[name], planted[name], name)
        }
        XCTAssertEqual(environment["DBUS_SESSION_BUS_ADDRESS"], bus.address, "the bus the service is on")
        XCTAssertEqual(environment["XDG_RUNTIME_DIR"], runtimeDirectory)
        XCTAssertEqual(environment["LATCHKEY_PROMPTER_FILE"], passwordFile, "meant for the prompter")
        XCTAssertNotNil(environment["PATH"])
        for name in [
            "SSH_AUTH_SOCK", "LATCHKEY_TEST_SECRET", "LD_PRELOAD", "LATCHKEYD", "LATCHKEY_PROMPTER",
            "XDG_DATA_HOME", "DBUS_SYSTEM_BUS_ADDRESS",
        ] {
            XCTAssertNil(environment[name], "\(name) reached the prompter")
        }
        let allowed = PrompterEnvironment.names.union(Self.shellVariables)
        for name in environment.keys where !allowed.contains(name) {
            XCTAssertTrue(PrompterEnvironment.prefixes.contains { name.hasPrefix($0) }, "\(name) reached the prompter")
        }
    }

    func testTheEnvironmentIsBuiltFromAnAllowList() {
        let agent = [
            "PATH=/opt/bin", "HOME=/home/u", "DISPLAY=:0", "LC_ALL=C", "LC_MESSAGES=de_DE.UTF-8",
            "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus", "LD_PRELOAD=/tmp/evil.so",
            "LATCHKEY_PROMPTER=pinentry", "LATCHKEY_PROMPTER_FILE=/f", "LISTEN_FDS=1", "NOTIFY_SOCKET=/x",
            "PATH=/second", "malformed",
        ]
        XCTAssertEqual(
            PrompterEnvironment.build(from: agent, busAddress: nil),
            [
                "PATH=/opt/bin", "HOME=/home/u", "DISPLAY=:0", "LC_ALL=C", "LC_MESSAGES=de_DE.UTF-8",
                "DBUS_SESSION_BUS_ADDRESS=unix:path=/run/user/1000/bus", "LATCHKEY_PROMPTER_FILE=/f",
            ])
        // The service's own bus wins over the agent's variable; PATH is never missing.
        XCTAssertEqual(
            PrompterEnvironment.build(
                from: ["DBUS_SESSION_BUS_ADDRESS=unix:path=/old", "TERM=vt100"],
                busAddress: "unix:path=/handed/over"),
            ["TERM=vt100", "PATH=/usr/local/bin:/usr/bin:/bin", "DBUS_SESSION_BUS_ADDRESS=unix:path=/handed/over"])
    }

    /// Starts `/bin/sleep 60` as our child.
    private func spawnSleeper() throws -> pid_t {
        var pid: pid_t = 0
        var argv: [UnsafeMutablePointer<CChar>?] = [strdup("/bin/sleep"), strdup("60"), nil]
        defer { for pointer in argv { free(pointer) } }
        let spawned = posix_spawn(&pid, "/bin/sleep", nil, nil, &argv, environ)
        guard spawned == 0 else { throw XCTSkip("cannot run /bin/sleep: \(spawned)") }
        return pid
    }

    private func waitUntilExited(_ pid: pid_t) -> Bool {
        for _ in 0..<500 {
            if PrompterProcess.hasExited(pid) { return true }
            usleep(10_000)
        }
        return false
    }

    func testACancelSignalsThePrompterOnlyUntilItIsReaped() throws {
        let cancellation = PromptCancellation()
        let pid = try spawnSleeper()
        cancellation.started(pid)
        XCTAssertFalse(PrompterProcess.hasExited(pid))
        cancellation.cancel()  // SIGTERM
        XCTAssertTrue(waitUntilExited(pid), "the prompter was stopped")
        // Exited but not reaped: the zombie keeps its pid, so it may still be signalled (harmlessly).
        XCTAssertTrue(PrompterProcess.hasExited(pid))
        XCTAssertTrue(cancellation.signal(0))
        cancellation.reap()
        var status: Int32 = 0
        XCTAssertEqual(waitpid(pid, &status, WNOHANG), -1, "reaped")
        // From now on the pid may belong to anyone: nothing is sent, whatever asks.
        XCTAssertFalse(cancellation.signal(0))
        XCTAssertFalse(cancellation.signal(SIGTERM))
        cancellation.cancel()
        XCTAssertTrue(cancellation.isCancelled)
        cancellation.reap()  // idempotent
    }

    func testAPromptDismissedBeforeItsPrompterStartedStopsItAtOnce() throws {
        let cancellation = PromptCancellation()
        cancellation.cancel()
        let pid = try spawnSleeper()
        cancellation.started(pid)
        XCTAssertTrue(waitUntilExited(pid), "started() stopped the prompter of a dismissed prompt")
        cancellation.reap()
        XCTAssertFalse(cancellation.signal(0))
    }
}
