import Foundation
import LatchkeyTestSupport
import XCTest

/// An agent stops on SIGTERM whatever signal mask it was started with. A program that starts it from a
/// thread blocking SIGTERM (a Dispatch worker thread blocks nearly every signal) passes that mask on
/// through exec; before the agent unblocked the signals itself, such an agent ignored `kill`, logout
/// and `systemctl --user stop` (found with agents a test's library had started, still running hours on).
final class AgentSignalTests: AgentTestCase {
    func testAnAgentStartedWithSignalsBlockedStillStopsOnSIGTERM() throws {
        let script = """
            import os, signal, subprocess, sys, time
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})
            env = dict(os.environ, XDG_RUNTIME_DIR=sys.argv[2], XDG_DATA_HOME=sys.argv[3])
            agent = subprocess.Popen([sys.argv[1]], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            socket = os.path.join(sys.argv[2], "latchkey", "agent.sock")
            deadline = time.monotonic() + 30
            while not os.path.exists(socket) and time.monotonic() < deadline:
                time.sleep(0.05)
            agent.send_signal(signal.SIGTERM)
            try:
                print("exit", agent.wait(timeout=10))
            except subprocess.TimeoutExpired:
                agent.kill()
                print("still running")
            """
        let result = try TestProcess.run(
            "/usr/bin/python3", ["-c", script, Self.binDirectory + "/latchkeyd", runtimeDirectory, dataDirectory])
        XCTAssertEqual(result.out.trimmingCharacters(in: .whitespacesAndNewlines), "exit 0", result.err)
    }
}
