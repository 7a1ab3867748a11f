import Foundation
import LatchkeyLog
import Logging
import XCTest

/// The agent's log line (LatchkeyLog, the handler `latchkeyd` bootstraps): exactly the format it wrote
/// before swift-log, and one line per event whatever the message holds. In-process, with a handler made
/// per logger (`Logger(label:factory:)`), so nothing here bootstraps the test process.
final class AgentLogFormatTests: XCTestCase {
    /// 2026-11-24T04:21:54Z.
    private let seconds = 1_795_494_114

    func testTodaysLevelsPrintAsBefore() {
        XCTAssertEqual(
            LogLine.format(
                level: .info, message: "listening on /run/user/1000/latchkey/agent.sock",
                seconds: seconds, pid: 4242),
            "2026-11-24T04:21:54Z latchkeyd[4242] info: listening on /run/user/1000/latchkey/agent.sock\n")
        XCTAssertEqual(
            LogLine.format(
                level: .warning, message: "refused a connection from another user", seconds: seconds, pid: 7),
            "2026-11-24T04:21:54Z latchkeyd[7] warning: refused a connection from another user\n")
        XCTAssertEqual(
            LogLine.format(level: .error, message: "accept: Too many open files", seconds: 0, pid: 1),
            "1970-01-01T00:00:00Z latchkeyd[1] error: accept: Too many open files\n")
    }

    func testOtherLevelsPrintUnderTheirSwiftLogNames() {
        let names = [Logger.Level.trace, .debug, .notice, .critical].map {
            LogLine.format(level: $0, message: "m", seconds: seconds, pid: 1)
        }
        XCTAssertEqual(
            names, ["trace", "debug", "notice", "critical"].map { "2026-11-24T04:21:54Z latchkeyd[1] \($0): m\n" })
    }

    func testANewlineInAMessageCannotForgeASecondLine() {
        let forged = "created the collection 'x'\n2026-11-24T04:21:54Z latchkeyd[1] error: forged"
        let line = LogLine.format(level: .info, message: forged, seconds: seconds, pid: 42)
        XCTAssertEqual(
            line,
            "2026-11-24T04:21:54Z latchkeyd[42] info: created the collection 'x'\\n"
                + "2026-11-24T04:21:54Z latchkeyd[1] error: forged\n")
        XCTAssertEqual(line.filter { $0 == "\n" }.count, 1)
    }

    func testControlCharactersAndLineSeparatorsAreEscapedReversibly() {
        XCTAssertEqual(
            LogLine.escaped("a\rb\tc\u{0}d\u{1B}[2Je\u{7F}f\u{85}g\u{2028}h\u{2029}i"),
            "a\\rb\\tc\\u{0}d\\u{1b}[2Je\\u{7f}f\\u{85}g\\u{2028}h\\u{2029}i")
        // The backslash is escaped too, so `\n` in a line always means an escaped newline.
        XCTAssertEqual(LogLine.escaped("C:\\n"), "C:\\\\n")
        // Everything else is written as it is.
        let plain = "Secret Service: deleted the collection 'Müller 日本' and its 3 items (pid 12)"
        XCTAssertEqual(LogLine.escaped(plain), plain)
    }

    func testMetadataFollowsTheMessageSortedAndEscaped() {
        XCTAssertEqual(
            LogLine.format(level: .info, message: "m", metadata: ["z": "1", "a": "x\ny"], seconds: seconds, pid: 1),
            "2026-11-24T04:21:54Z latchkeyd[1] info: m a=x\\ny z=1\n")
        XCTAssertEqual(
            LogLine.format(level: .info, message: "m", metadata: [:], seconds: seconds, pid: 1),
            "2026-11-24T04:21:54Z latchkeyd[1] info: m\n")
    }

    /// The handler through a real `Logger`, writing to a file: one whole line per event, this process's
    /// pid, the current time, `info` as the default level.
    func testHandlerWritesOneLinePerEventAtInfoAndAbove() throws {
        let path = NSTemporaryDirectory() + "lk-logformat-\(UUID().uuidString.prefix(8))"
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer {
            close(fd)
            unlink(path)
        }
        let output = LogOutput(descriptor: fd)
        var logger = Logger(label: "latchkeyd") { _ in AgentLogHandler(output: output) }

        let before = Int(Date().timeIntervalSince1970)
        logger.trace("dropped")
        logger.debug("dropped")
        logger.info("unlocked by pid 12")
        logger.warning("two\nlines")
        logger[metadataKey: "peer"] = ":1.5"
        logger.error("failed", metadata: ["status": "-25300"])
        let after = Int(Date().timeIntervalSince1970)

        let lines = try String(contentsOfFile: path, encoding: .utf8).split(
            separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(lines.count, 4, "three lines and the empty rest after the last newline")
        let expected: [(Logger.Level, String, Logger.Metadata?)] = [
            (.info, "unlocked by pid 12", nil), (.warning, "two\nlines", nil),
            (.error, "failed", ["peer": ":1.5", "status": "-25300"]),
        ]
        for (line, (level, message, metadata)) in zip(lines, expected) {
            let candidates = (before...after).map {
                LogLine.format(level: level, message: message, metadata: metadata, seconds: $0, pid: getpid())
            }
            XCTAssertTrue(candidates.contains(line + "\n"), "unexpected line: \(line)")
        }
        XCTAssertEqual(lines.last, "")
    }
}
