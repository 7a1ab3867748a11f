import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import Logging
import XCTest

@testable import LatchkeyDesktop

/// Collects a watcher's events and log lines, and fulfils expectations when a condition on them holds.
final class Recorder: @unchecked Sendable {
    struct Line: Equatable {
        let level: Logger.Level
        let text: String
    }

    /// A logger whose lines, `.debug` included, are recorded here.
    var logger: Logger {
        Logger(label: "LockWatcherTests") { _ in RecordingHandler(recorder: self) }
    }

    private let lock = NSLock()
    private var _events: [LockEvent] = []
    private var _lines: [Line] = []
    private var waiters: [(condition: ([LockEvent], [Line]) -> Bool, expectation: XCTestExpectation)] = []

    var events: [LockEvent] { lock.withLock { _events } }
    var lines: [Line] { lock.withLock { _lines } }

    func record(_ event: LockEvent) { update { _events.append(event) } }

    func log(_ level: Logger.Level, _ text: String) {
        update { _lines.append(Line(level: level, text: text)) }
        if ProcessInfo.processInfo.environment["LATCHKEY_TEST_VERBOSE"] != nil { print("[\(level)] \(text)") }
    }

    /// An expectation fulfilled as soon as `condition` holds (immediately if it already does).
    func expectation(
        _ description: String,
        _ condition: @escaping ([LockEvent], [Line]) -> Bool
    ) -> XCTestExpectation {
        let expectation = XCTestExpectation(description: description)
        let holds = lock.withLock {
            if condition(_events, _lines) { return true }
            waiters.append((condition, expectation))
            return false
        }
        if holds { expectation.fulfill() }
        return expectation
    }

    /// Applies `change` under the lock, then fulfils the expectations whose condition now holds.
    private func update(_ change: () -> Void) {
        let ready: [XCTestExpectation] = lock.withLock {
            change()
            let (met, pending) = (
                waiters.filter { $0.condition(_events, _lines) },
                waiters.filter { !$0.condition(_events, _lines) }
            )
            waiters = pending
            return met.map(\.expectation)
        }
        for expectation in ready { expectation.fulfill() }
    }
}

extension XCTestCase {
    /// Waits (up to a few seconds) until `recorder` holds `count` events; returns them all.
    @discardableResult
    func waitForEvents(_ recorder: Recorder, count: Int, file: StaticString = #filePath, line: UInt = #line)
        -> [LockEvent]
    {
        let expectation = recorder.expectation("\(count) events") { events, _ in events.count >= count }
        let result = XCTWaiter().wait(for: [expectation], timeout: 5)
        if result != .completed {
            XCTFail("timed out waiting for \(count) events; got \(recorder.events)", file: file, line: line)
        }
        return recorder.events
    }

    /// Waits (up to a few seconds) until a log line contains `text`.
    func waitForLog(
        _ recorder: Recorder, containing text: String, level: Logger.Level? = nil,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        let expectation = recorder.expectation("log line with \(text)") { _, lines in
            lines.contains { $0.text.contains(text) && (level == nil || $0.level == level) }
        }
        let result = XCTWaiter().wait(for: [expectation], timeout: 5)
        if result != .completed {
            XCTFail(
                "timed out waiting for a log line with \"\(text)\"; got \(recorder.lines.map(\.text))",
                file: file, line: line)
        }
    }
}

/// Hands every event at `.debug` and above to a `Recorder`.
private struct RecordingHandler: LogHandler {
    let recorder: Recorder
    var logLevel: Logger.Level = .debug
    var metadata: Logger.Metadata = [:]

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        recorder.log(event.level, event.message.description)
    }
}

/// A logind stand-in on a private system bus: owns org.freedesktop.login1, answers
/// `Manager.ListSessions` from `sessions`, and emits whatever the test asks for.
final class FakeLogind {
    static let manager = "org.freedesktop.login1.Manager"
    static let session = "org.freedesktop.login1.Session"

    /// (id, uid, path) rows for ListSessions; touched only on the connection's loop thread.
    final class Table: @unchecked Sendable {
        var rows: [(id: String, uid: UInt32, path: String)] = []
    }

    let connection: BusConnection
    let table = Table()

    init(address: String, sessions: [(id: String, uid: UInt32, path: String)], ownName: Bool = true) throws {
        connection = try BusConnection(.address(address))
        let table = self.table
        try connection.sync { bus in
            table.rows = sessions
            try bus.addObject(path: "/org/freedesktop/login1") { call in
                guard call.interface == Self.manager, call.member == "ListSessions" else { return .notHandled }
                try call.reply([
                    .array(
                        elementType: "(susso)",
                        table.rows.map { row in
                            .structure([
                                .string(row.id), .uint32(row.uid), .string("user\(row.uid)"), .string("seat0"),
                                .objectPath(row.path),
                            ])
                        })
                ])
                return .handled
            }
            if ownName { try bus.requestName("org.freedesktop.login1") }
        }
    }

    func setSessions(_ sessions: [(id: String, uid: UInt32, path: String)]) throws {
        let table = self.table
        try connection.sync { _ in table.rows = sessions }
    }

    func emit(path: String, interface: String, member: String, _ arguments: [BusValue] = []) throws {
        try connection.sync { bus in try bus.emitSignal(path: path, interface: interface, member: member, arguments) }
    }

    func emitLockedHint(path: String, _ locked: Bool) throws {
        try emit(
            path: path, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            [
                .string(Self.session),
                .dictionary(keyType: "s", valueType: "v", [(.string("LockedHint"), .variant(.boolean(locked)))]),
                .strings([]),
            ])
    }
}
