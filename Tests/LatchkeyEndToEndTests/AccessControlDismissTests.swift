import Foundation
import LatchkeyTestSupport
import XCTest

/// A client that disconnects while its user check is shown, or queued, dismisses it: the agent notices
/// the closed connection, stops that prompt (or takes the check out of the queue) and the next check
/// goes on. The prompter's timeout is 300 s here, so without the dismissal the next check could not
/// start within the tests' deadlines (liveness bounds, not speed claims).
final class AccessControlDismissTests: AccessControlTestCase {
    private var prompterPIDs: String { work + "/prompter-pids" }

    override func setUpWithError() throws {
        try super.setUpWithError()
        // The stand-in pinentry, also recording its pid (kept by `exec sleep` when it never answers).
        let prompter = work + "/prompter"
        let script = try String(contentsOfFile: prompter, encoding: .utf8)
        try write(
            script.replacingOccurrences(of: "n=0\n", with: "n=0\necho $$ >> \"\(prompterPIDs)\"\n"), to: prompter,
            mode: 0o755)
        // A restarted agent reads the long timeout; then the keychain is unlocked again.
        setenv("LATCHKEY_PRESENCE_TIMEOUT", "300", 1)
        stopAgent()
        waitUntilNothingListens()
        let unlocked = try cli(["unlock", "--password-stdin"], input: "pw\n")
        XCTAssertEqual(unlocked.status, 0, unlocked.err)
        addProtected()
    }

    /// Starts `latchkey find-generic-password -w` on the protected item, in the background.
    private func startReader() throws -> Process {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.binDirectory + "/latchkey")
        process.arguments = ["find-generic-password", "-s", "ac", "-a", "guarded", "-w"]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    private func until(_ deadline: TimeInterval, _ condition: () -> Bool) -> Bool {
        let end = Date().addingTimeInterval(deadline)
        while !condition() {
            if Date() > end { return false }
            usleep(20_000)
        }
        return true
    }

    private func prompts() -> [pid_t] {
        ((try? String(contentsOfFile: prompterPIDs, encoding: .utf8)) ?? "").split(separator: "\n").compactMap {
            pid_t($0)
        }
    }

    private func isRunning(_ pid: pid_t) -> Bool {
        guard kill(pid, 0) == 0 else { return false }
        let state = TestProcess.readProcFile("/proc/\(pid)/stat")?.split(separator: " ").dropFirst(2).first
        return state != "Z"
    }

    func testAKilledClientDismissesItsShownAndQueuedPrompts() throws {
        try answer("!wait")
        let first = try startReader()
        XCTAssertTrue(until(30) { prompts().count == 1 }, "the first prompt is shown")
        // A second program's check queues behind it (no prompt of its own yet).
        let second = try startReader()
        usleep(500_000)
        XCTAssertEqual(prompts().count, 1, "one prompt at a time")
        // The queued client goes away: its check leaves the queue (no prompt is ever shown for it).
        kill(second.processIdentifier, SIGKILL)
        second.waitUntilExit()
        // The shown one's client goes away: its prompter is stopped.
        let shownPrompter = prompts()[0]
        XCTAssertTrue(isRunning(shownPrompter))
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        XCTAssertTrue(until(30) { !isRunning(shownPrompter) }, "the dismissed prompt was stopped")

        // The next program's check proceeds, and is the next prompt shown (the killed queued one never was).
        try answer("sesame")
        let done = expectation(description: "the third read ends")
        let output = LockedBox<String?>(nil)
        let binary = Self.binDirectory + "/latchkey"
        Thread.detachNewThread {
            let result = try? TestProcess.run(binary, ["find-generic-password", "-s", "ac", "-a", "guarded", "-w"])
            output.set(result?.out)
            done.fulfill()
        }
        wait(for: [done], timeout: 60)
        XCTAssertEqual(output.get(), "s3cret\n")
        XCTAssertEqual(prompts().count, 2, "the queued, dismissed check never showed a prompt")
    }
}
