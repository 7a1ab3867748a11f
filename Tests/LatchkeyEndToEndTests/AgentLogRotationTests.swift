import Foundation
import LatchkeyLog
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// The cap on agent.log (LatchkeyLog's `LogOutput`): in-process with threads and planted files, then
/// end to end against the real agent started on demand with `LATCHKEY_LOG_LIMIT`.
final class LogOutputRotationTests: XCTestCase {
    private var directory = ""
    private var path: String { directory + "/agent.log" }

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "lk-logrot-\(UUID().uuidString.prefix(8))"
        XCTAssertEqual(mkdir(directory, 0o700), 0)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func openLog() -> Int32 {
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        XCTAssertGreaterThanOrEqual(fd, 0)
        return fd
    }

    func testConcurrentWritersStayBoundedWholeAndNewestLast() throws {
        let fd = openLog()
        defer { close(fd) }
        let output = LogOutput(descriptor: fd)
        let limit = 2048
        XCTAssertTrue(output.bound(path: path, limit: limit))

        let threads = 8, perThread = 300
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for n in 0..<perThread { output.write(LogLine.now(.info, "thread \(thread) line \(n) end")) }
        }
        output.write(LogLine.now(.info, "the newest line end"))

        // Each writer checks the size after its own line, so a file passes the limit by at most one line
        // per thread before it is rotated.
        let longest = LogLine.now(.info, "thread 7 line 299 end").utf8.count
        for file in [path, path + ".1"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: file)
            XCTAssertLessThanOrEqual((attributes[.size] as? Int) ?? .max, limit + threads * longest, file)
            XCTAssertEqual(attributes[.posixPermissions] as? Int, 0o600, file)
            for line in try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n") {
                XCTAssertTrue(
                    line.contains(" latchkeyd[\(getpid())] info: ") && line.hasSuffix(" end"), "broken line: \(line)")
            }
        }
        // The newest line is the last one kept: at the end of agent.log, or, when it was the line that took
        // the file over the limit (the size is checked after each write), at the end of agent.log.1 with
        // agent.log fresh and empty.
        let current = try String(contentsOfFile: path, encoding: .utf8)
        let newest = current.isEmpty ? try String(contentsOfFile: path + ".1", encoding: .utf8) : current
        XCTAssertTrue(newest.hasSuffix("info: the newest line end\n"), newest)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path + ".2"))
    }

    func testALogLeftOverTheLimitIsRotatedAtOnce() throws {
        let fd = openLog()
        defer { close(fd) }
        let old = String(repeating: "x", count: 4999) + "\n"
        XCTAssertEqual(write(fd, old, old.utf8.count), old.utf8.count)
        XCTAssertTrue(LogOutput(descriptor: fd).bound(path: path, limit: 1024))
        XCTAssertEqual(try String(contentsOfFile: path + ".1", encoding: .utf8), old)
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "")
    }

    func testOnlyTheDescriptorsOwnFileIsCapped() throws {
        var pipeFDs: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&pipeFDs), 0)
        defer {
            close(pipeFDs[0])
            close(pipeFDs[1])
        }
        XCTAssertFalse(LogOutput(descriptor: pipeFDs[1]).bound(path: path, limit: 1024), "a pipe (the journal's case)")

        let fd = openLog()
        defer { close(fd) }
        XCTAssertFalse(LogOutput(descriptor: fd).bound(path: path, limit: 0), "0 means no cap")
        XCTAssertFalse(LogOutput(descriptor: fd).bound(path: directory + "/other.log", limit: 1024), "no such file")
        XCTAssertEqual(symlink(path, directory + "/link.log"), 0)
        XCTAssertFalse(LogOutput(descriptor: fd).bound(path: directory + "/link.log", limit: 1024), "a symlink to it")
    }

    func testASymlinkAtTheRotatedNameIsReplacedNotFollowed() throws {
        let victim = directory + "/victim"
        XCTAssertTrue(FileManager.default.createFile(atPath: victim, contents: Data("keep\n".utf8)))
        XCTAssertEqual(symlink(victim, path + ".1"), 0)
        let fd = openLog()
        defer { close(fd) }
        let output = LogOutput(descriptor: fd)
        XCTAssertTrue(output.bound(path: path, limit: 256))
        for n in 0..<20 { output.write(LogLine.now(.info, "line \(n)")) }

        XCTAssertEqual(try String(contentsOfFile: victim, encoding: .utf8), "keep\n")
        let rotated = try FileManager.default.attributesOfItem(atPath: path + ".1")
        XCTAssertEqual(rotated[.type] as? FileAttributeType, .typeRegular)
    }

    func testAFailedRotationIsLoggedOnceAndWritingGoesOn() throws {
        // rename(2) cannot replace a non-empty directory with a file.
        XCTAssertEqual(mkdir(path + ".1", 0o700), 0)
        XCTAssertEqual(mkdir(path + ".1/full", 0o700), 0)
        let fd = openLog()
        defer { close(fd) }
        let output = LogOutput(descriptor: fd)
        XCTAssertTrue(output.bound(path: path, limit: 256))
        for n in 0..<40 { output.write(LogLine.now(.info, "line \(n)")) }

        let log = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertEqual(log.components(separatedBy: " warning: cannot rotate \(path): rename: ").count - 1, 1, log)
        XCTAssertTrue(log.contains("the log is no longer capped"), log)
        XCTAssertTrue(log.hasSuffix("info: line 39\n"), log)
        XCTAssertGreaterThan(log.utf8.count, 1024)
    }
}

/// The real agent, started on demand by the library with its standard error on agent.log.
final class AgentLogRotationTests: AgentTestCase {
    override func tearDown() {
        super.tearDown()
        unsetenv("LATCHKEY_LOG_LIMIT")
    }

    func testAgentLogIsCappedAndKeepsTheNewestLines() throws {
        let limit = 4096
        setenv("LATCHKEY_LOG_LIMIT", "\(limit)", 1)
        try createKeychain()
        guard let pid = agentPID() else { return XCTFail("no agent") }
        // Each lock logs one line of about 70 bytes: 300 of them fill the cap several times over.
        for _ in 0..<300 { XCTAssertEqual(AgentClient.shared.send(.lock(all: false)).status, 0) }
        XCTAssertEqual(AgentClient.shared.send(.lock(all: true)).status, 0)

        let log = runtimeDirectory + "/latchkey/agent.log"
        let pattern = try NSRegularExpression(
            pattern: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ latchkeyd\[\#(pid)\] (info|warning|error): \S.*$"#)
        for file in [log, log + ".1"] {
            let attributes = try FileManager.default.attributesOfItem(atPath: file)
            XCTAssertLessThanOrEqual((attributes[.size] as? Int) ?? .max, limit + 512, file)
            XCTAssertEqual(attributes[.posixPermissions] as? Int, 0o600, file)
            for line in try String(contentsOfFile: file, encoding: .utf8).split(separator: "\n").map(String.init) {
                let range = NSRange(line.startIndex..., in: line)
                XCTAssertNotNil(pattern.firstMatch(in: line, range: range), "not the agent's line format: \(line)")
            }
        }
        let current = try String(contentsOfFile: log, encoding: .utf8)
        XCTAssertTrue(current.hasSuffix("] info: locked all password classes (pid \(getpid()))\n"), current)
        XCTAssertFalse(FileManager.default.fileExists(atPath: log + ".2"))
    }

    func testALogLimitThatIsNotANumberIsAUsageError() throws {
        let latchkeyd = Self.binDirectory + "/latchkeyd"
        XCTAssertEqual(try TestProcess.run(latchkeyd, ["--log-limit", "1MiB"]).status, 64)
        setenv("LATCHKEY_LOG_LIMIT", "-1", 1)
        XCTAssertEqual(try TestProcess.run(latchkeyd, ["--version"]).status, 64)
    }
}
