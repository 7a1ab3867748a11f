import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

@testable import LatchkeyDesktop

/// LockWatcher against private system- and session-type dbus-daemons, a fake logind, and real peers
/// (BusConnection and dbus-send) that play screen savers and spoofers.
final class LockWatcherTests: XCTestCase {
    private var systemBus: PrivateBus!
    private var sessionBus: PrivateBus!
    private var watcher: LockWatcher?
    private var peers: [BusConnection] = []
    private let recorder = Recorder()

    private let uid = UInt32(getuid())
    private var otherUID: UInt32 { uid &+ 1000 }
    private let ourSession = "/org/freedesktop/login1/session/c1"
    private let otherSession = "/org/freedesktop/login1/session/c2"

    override func setUpWithError() throws {
        systemBus = try PrivateBus(system: true)
        sessionBus = try PrivateBus(system: false)
    }

    override func tearDown() {
        watcher?.stop()
        watcher = nil
        for peer in peers { peer.close() }
        peers = []
        systemBus?.stop()
        sessionBus?.stop()
    }

    // MARK: Helpers

    private func startWatcher(
        onSessionRemoved: @escaping @Sendable (String) -> Void = { _ in }, file: StaticString = #filePath,
        line: UInt = #line
    ) {
        let recorder = self.recorder
        let watcher = LockWatcher(
            systemBus: .address(systemBus.address), sessionBus: .address(sessionBus.address),
            uid: uid_t(uid), onEvent: { recorder.record($0) }, onSessionRemoved: onSessionRemoved,
            log: recorder.logger)
        XCTAssertTrue(watcher.waitUntilReady(timeout: .seconds(5)), "watcher not ready", file: file, line: line)
        self.watcher = watcher
    }

    private func startLogind(ownName: Bool = true) throws -> FakeLogind {
        let logind = try FakeLogind(
            address: systemBus.address,
            sessions: [
                (id: "c1", uid: uid, path: ourSession), (id: "c2", uid: otherUID, path: otherSession),
            ], ownName: ownName)
        peers.append(logind.connection)
        return logind
    }

    private func peer(on bus: PrivateBus, owning name: String? = nil) throws -> BusConnection {
        let connection = try BusConnection(.address(bus.address))
        peers.append(connection)
        if let name { _ = try connection.sync { try $0.requestName(name) } }
        return connection
    }

    private func activeChanged(
        _ connection: BusConnection, _ active: Bool,
        name: String = "org.freedesktop.ScreenSaver", path: String = "/ScreenSaver"
    ) throws {
        try connection.sync { bus in
            try bus.emitSignal(path: path, interface: name, member: "ActiveChanged", [.boolean(active)])
        }
    }

    // MARK: logind

    func testLockAndUnlockOnOurSession() throws {
        let logind = try startLogind()
        startWatcher()
        try logind.emit(path: ourSession, interface: FakeLogind.session, member: "Lock")
        try logind.emit(path: ourSession, interface: FakeLogind.session, member: "Unlock")
        XCTAssertEqual(
            waitForEvents(recorder, count: 2),
            [.locked(source: "login1.Lock"), .unlocked(source: "login1.Unlock")])
    }

    func testLockOnAnotherUsersSessionIsIgnored() throws {
        let logind = try startLogind()
        startWatcher()
        try logind.emit(path: otherSession, interface: FakeLogind.session, member: "Lock")
        try logind.emit(path: ourSession, interface: FakeLogind.session, member: "Lock")  // arrives after, same sender
        XCTAssertEqual(waitForEvents(recorder, count: 1), [.locked(source: "login1.Lock")])
        XCTAssertTrue(recorder.lines.contains { $0.level == .debug && $0.text.contains(otherSession) })
    }

    func testLockFromANonOwnerIsIgnored() throws {
        let logind = try startLogind()
        startWatcher()
        let spoofer = try peer(on: systemBus)
        let path = ourSession
        try spoofer.sync { bus in
            try bus.emitSignal(path: path, interface: FakeLogind.session, member: "Lock")
        }
        waitForLog(recorder, containing: "ignored Session.Lock from \(spoofer.uniqueName)", level: .debug)
        try logind.emit(path: ourSession, interface: FakeLogind.session, member: "Unlock")
        XCTAssertEqual(waitForEvents(recorder, count: 1), [.unlocked(source: "login1.Unlock")])
    }

    func testLockedHintChanges() throws {
        let logind = try startLogind()
        startWatcher()
        try logind.emitLockedHint(path: ourSession, true)
        // Other properties of our session change too; they are not lock events.
        try logind.emit(
            path: ourSession, interface: "org.freedesktop.DBus.Properties", member: "PropertiesChanged",
            [
                .string(FakeLogind.session),
                .dictionary(keyType: "s", valueType: "v", [(.string("IdleHint"), .variant(.boolean(true)))]),
                .strings([]),
            ])
        try logind.emitLockedHint(path: otherSession, true)
        try logind.emitLockedHint(path: ourSession, false)
        XCTAssertEqual(
            waitForEvents(recorder, count: 2),
            [.locked(source: "login1.LockedHint"), .unlocked(source: "login1.LockedHint")])
    }

    func testPrepareForSleep() throws {
        let logind = try startLogind()
        startWatcher()
        try logind.emit(
            path: "/org/freedesktop/login1", interface: FakeLogind.manager, member: "PrepareForSleep",
            [.boolean(true)])
        try logind.emit(
            path: "/org/freedesktop/login1", interface: FakeLogind.manager, member: "PrepareForSleep",
            [.boolean(false)])
        XCTAssertEqual(waitForEvents(recorder, count: 2), [.preparingForSleep, .resumed])
    }

    func testSessionsAreKeptCurrent() throws {
        let logind = try startLogind()
        startWatcher()
        let newSession = "/org/freedesktop/login1/session/c3"
        try logind.setSessions([(id: "c1", uid: uid, path: ourSession), (id: "c3", uid: uid, path: newSession)])
        try logind.emit(
            path: "/org/freedesktop/login1", interface: FakeLogind.manager, member: "SessionNew",
            [.string("c3"), .objectPath(newSession)])
        waitForLog(recorder, containing: "watching 2 logind session(s)")
        try logind.emit(
            path: "/org/freedesktop/login1", interface: FakeLogind.manager, member: "SessionRemoved",
            [.string("c1"), .objectPath(ourSession)])
        try logind.emit(path: ourSession, interface: FakeLogind.session, member: "Lock")  // removed: ignored
        try logind.emit(path: newSession, interface: FakeLogind.session, member: "Unlock")
        XCTAssertEqual(waitForEvents(recorder, count: 1), [.unlocked(source: "login1.Unlock")])
    }

    /// SessionRemoved is passed on with its id, of whichever uid (the agent matches the ids of its own
    /// login sessions), only from logind's owner, and is no lock event.
    func testSessionRemovedIsReportedFromLogindOnly() throws {
        final class Removed: @unchecked Sendable {
            private let lock = NSLock()
            private var ids: [String] = []
            func append(_ id: String) { lock.withLock { ids.append(id) } }
            var all: [String] { lock.withLock { ids } }
        }
        let removed = Removed()
        let logind = try startLogind()
        startWatcher(onSessionRemoved: { removed.append($0) })
        let spoofer = try peer(on: systemBus)
        let path = ourSession
        try spoofer.sync { bus in
            try bus.emitSignal(
                path: "/org/freedesktop/login1", interface: FakeLogind.manager, member: "SessionRemoved",
                [.string("c1"), .objectPath(path)])
        }
        waitForLog(recorder, containing: "ignored Manager.SessionRemoved from \(spoofer.uniqueName)", level: .debug)
        try logind.emit(
            path: "/org/freedesktop/login1", interface: FakeLogind.manager, member: "SessionRemoved",
            [.string("c2"), .objectPath(otherSession)])
        try logind.emit(
            path: "/org/freedesktop/login1", interface: FakeLogind.manager, member: "SessionRemoved",
            [.string("c1"), .objectPath(ourSession)])
        XCTAssertTrue(Poll.until(within: 5) { removed.all.count == 2 }, "\(removed.all)")
        XCTAssertEqual(removed.all, ["c2", "c1"])
        XCTAssertEqual(recorder.events, [])
    }

    func testLogindStartingLaterIsPickedUp() throws {
        startWatcher()
        waitForLog(recorder, containing: "is not on the system bus", level: .info)
        let logind = try startLogind()
        waitForLog(recorder, containing: "watching 1 logind session(s)")
        try logind.emit(path: ourSession, interface: FakeLogind.session, member: "Lock")
        XCTAssertEqual(waitForEvents(recorder, count: 1), [.locked(source: "login1.Lock")])
    }

    // MARK: Screen savers

    func testScreenSaverOwnersAreBelieved() throws {
        let freedesktop = try peer(on: sessionBus, owning: "org.freedesktop.ScreenSaver")  // before the watcher
        startWatcher()
        let gnome = try peer(on: sessionBus, owning: "org.gnome.ScreenSaver")  // after: learnt from NameOwnerChanged
        try activeChanged(freedesktop, true, path: "/ScreenSaver")
        try activeChanged(freedesktop, false, path: "/org/freedesktop/ScreenSaver")
        XCTAssertEqual(
            waitForEvents(recorder, count: 2),
            [
                .locked(source: "org.freedesktop.ScreenSaver"),
                .unlocked(source: "org.freedesktop.ScreenSaver"),
            ])
        try activeChanged(gnome, true, name: "org.gnome.ScreenSaver", path: "/org/gnome/ScreenSaver")
        XCTAssertEqual(waitForEvents(recorder, count: 3).last, .locked(source: "org.gnome.ScreenSaver"))
    }

    func testSpoofedActiveChangedIsIgnored() throws {
        let owner = try peer(on: sessionBus, owning: "org.freedesktop.ScreenSaver")
        startWatcher()
        let send = Process()
        send.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-send")
        send.arguments = [
            "--bus=\(sessionBus.address)", "--type=signal", "/org/freedesktop/ScreenSaver",
            "org.freedesktop.ScreenSaver.ActiveChanged", "boolean:false",
        ]
        try send.run()
        send.waitUntilExit()
        XCTAssertEqual(send.terminationStatus, 0)
        waitForLog(recorder, containing: "ignored org.freedesktop.ScreenSaver.ActiveChanged from :", level: .debug)
        // A name nobody owns: every sender is a spoofer.
        let spoofer = try peer(on: sessionBus)
        try activeChanged(spoofer, false, name: "org.xfce.ScreenSaver", path: "/org/xfce/ScreenSaver")
        waitForLog(recorder, containing: "the owner of org.xfce.ScreenSaver is nobody", level: .debug)
        try activeChanged(owner, true)
        XCTAssertEqual(waitForEvents(recorder, count: 1), [.locked(source: "org.freedesktop.ScreenSaver")])
    }

    func testOwnershipMoves() throws {
        let name = "org.freedesktop.ScreenSaver"
        let first = try peer(on: sessionBus, owning: name)
        startWatcher()
        try activeChanged(first, true)
        XCTAssertEqual(waitForEvents(recorder, count: 1), [.locked(source: name)])

        // The owner exits; another client takes the name and is believed.
        first.close()
        let second = try peer(on: sessionBus, owning: name)
        try activeChanged(second, false)
        XCTAssertEqual(waitForEvents(recorder, count: 2).last, .unlocked(source: name))

        // The owner gives the name up but stays connected: its signals no longer count.
        try second.sync { try $0.releaseName(name) }
        let third = try peer(on: sessionBus, owning: name)
        try activeChanged(second, true)
        waitForLog(recorder, containing: "ignored \(name).ActiveChanged from \(second.uniqueName)", level: .debug)
        try activeChanged(third, false)
        XCTAssertEqual(
            waitForEvents(recorder, count: 3),
            [.locked(source: name), .unlocked(source: name), .unlocked(source: name)])
    }

    func testManySignalsArriveInOrder() throws {
        let owner = try peer(on: sessionBus, owning: "org.gnome.ScreenSaver")
        startWatcher()
        let count = 500
        try owner.sync { bus in
            for index in 0..<count {
                try bus.emitSignal(
                    path: "/org/gnome/ScreenSaver", interface: "org.gnome.ScreenSaver",
                    member: "ActiveChanged", [.boolean(index % 2 == 0)])
            }
        }
        let expected: [LockEvent] = (0..<count).map {
            $0 % 2 == 0 ? .locked(source: "org.gnome.ScreenSaver") : .unlocked(source: "org.gnome.ScreenSaver")
        }
        XCTAssertEqual(waitForEvents(recorder, count: count), expected)
    }

    // MARK: Missing and lost buses

    func testUnreachableBusesAreLoggedOnceAndDeliverNothing() throws {
        let recorder = self.recorder
        let watcher = LockWatcher(
            systemBus: .address("unix:path=\(systemBus.directory)/missing-system"),
            sessionBus: .address("unix:path=\(sessionBus.directory)/missing-session"),
            onEvent: { recorder.record($0) }, log: recorder.logger)
        XCTAssertTrue(watcher.waitUntilReady(timeout: .seconds(5)))
        let warnings = recorder.lines.filter { $0.level == .warning }
        XCTAssertEqual(warnings.count, 2, "\(recorder.lines)")
        XCTAssertEqual(
            warnings.filter { $0.text.contains("missing-system") && $0.text.contains("system bus") }.count, 1)
        XCTAssertEqual(
            warnings.filter { $0.text.contains("missing-session") && $0.text.contains("session bus") }.count,
            1)
        watcher.stop()
        XCTAssertEqual(recorder.events, [])
        XCTAssertEqual(recorder.lines.count, 2)
    }

    func testDefaultEndpointsComeFromTheEnvironment() throws {
        let names: [String] = ["DBUS_SYSTEM_BUS_ADDRESS", "DBUS_SESSION_BUS_ADDRESS"]
        let saved = names.map { ($0, getenv($0).map { String(cString: $0) }) }
        defer { for (name, value) in saved { if let value { setenv(name, value, 1) } else { unsetenv(name) } } }
        setenv("DBUS_SYSTEM_BUS_ADDRESS", systemBus.address, 1)
        setenv("DBUS_SESSION_BUS_ADDRESS", sessionBus.address, 1)

        let logind = try startLogind()
        let saver = try peer(on: sessionBus, owning: "org.xfce.ScreenSaver")
        let recorder = self.recorder
        watcher = LockWatcher(onEvent: { recorder.record($0) }, log: recorder.logger)
        XCTAssertTrue(watcher?.waitUntilReady(timeout: .seconds(5)) ?? false)
        try logind.emit(path: ourSession, interface: FakeLogind.session, member: "Lock")
        XCTAssertEqual(waitForEvents(recorder, count: 1), [.locked(source: "login1.Lock")])
        try activeChanged(saver, true, name: "org.xfce.ScreenSaver", path: "/org/xfce/ScreenSaver")
        XCTAssertEqual(waitForEvents(recorder, count: 2).last, .locked(source: "org.xfce.ScreenSaver"))
    }

    /// stop() frees both connections and, with them, every handler and the state they captured (each
    /// watch logs from its deinit, so a retain cycle would show here).
    func testStopReleasesTheWatches() throws {
        _ = try startLogind()
        startWatcher()
        watcher?.stop()
        let released = recorder.lines.filter { $0.text.hasPrefix("stopped watching") }.map(\.text)
        XCTAssertEqual(Set(released), ["stopped watching logind", "stopped watching the screen savers"])
    }

    func testLostSessionBusIsLoggedOnceAndLogindStillWorks() throws {
        let logind = try startLogind()
        startWatcher()
        sessionBus.stop()
        waitForLog(recorder, containing: "session bus disconnected", level: .warning)
        try logind.emit(path: ourSession, interface: FakeLogind.session, member: "Lock")
        XCTAssertEqual(waitForEvents(recorder, count: 1), [.locked(source: "login1.Lock")])
        XCTAssertEqual(recorder.lines.filter { $0.text.contains("disconnected") }.count, 1)
    }

    /// A session bus that goes away and comes back at the same address (a new login while the agent lives
    /// on) is watched again; so is one that was not there when the watcher started.
    func testASessionBusThatComesBackIsWatchedAgain() throws {
        let directory = NSTemporaryDirectory() + "lkdesk-restart-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/session.sock"
        sessionBus.stop()
        let recorder = self.recorder
        let watcher = LockWatcher(
            systemBus: nil, sessionBus: .address("unix:path=\(socket)"),
            retry: .init(initial: 0.05, maximum: 0.2),
            onEvent: { recorder.record($0) }, log: recorder.logger)
        self.watcher = watcher
        XCTAssertTrue(watcher.waitUntilReady(timeout: .seconds(5)))
        waitForLog(recorder, containing: "session bus unavailable", level: .warning)

        // It appears: the watcher connects by itself.
        sessionBus = try PrivateBus(system: false, socketPath: socket)
        waitForLog(recorder, containing: "session bus reachable again", level: .info)
        let first = try peer(on: sessionBus, owning: "org.freedesktop.ScreenSaver")
        // Either the watch's first query finds the owner, or the ownership change reaches it afterwards.
        let known = recorder.expectation("owner known") { _, lines in
            lines.contains {
                $0.text.contains("org.freedesktop.ScreenSaver is now")
                    || $0.text.contains("watching screen saver org.freedesktop.ScreenSaver")
            }
        }
        XCTAssertEqual(XCTWaiter().wait(for: [known], timeout: 5), .completed, "\(recorder.lines.map(\.text))")
        try activeChanged(first, true)
        XCTAssertEqual(waitForEvents(recorder, count: 1), [.locked(source: "org.freedesktop.ScreenSaver")])

        // It goes away and comes back: logged once each way, and the new screen saver is believed.
        sessionBus.stop()
        waitForLog(recorder, containing: "session bus disconnected", level: .warning)
        unlink(socket)
        sessionBus = try PrivateBus(system: false, socketPath: socket)
        let second = try peer(on: sessionBus, owning: "org.gnome.ScreenSaver")
        let expectation = recorder.expectation("reconnected and watching") { _, lines in
            lines.filter { $0.text.contains("session bus reachable again") }.count == 2
                && lines.contains {
                    $0.text.contains("watching screen saver org.gnome.ScreenSaver")
                        || $0.text.contains("org.gnome.ScreenSaver is now")
                }
        }
        XCTAssertEqual(XCTWaiter().wait(for: [expectation], timeout: 10), .completed, "\(recorder.lines.map(\.text))")
        try activeChanged(second, false, name: "org.gnome.ScreenSaver", path: "/org/gnome/ScreenSaver")
        XCTAssertEqual(waitForEvents(recorder, count: 2).last, .unlocked(source: "org.gnome.ScreenSaver"))
        XCTAssertEqual(recorder.lines.filter { $0.text.contains("disconnected") }.count, 1)
        XCTAssertEqual(
            recorder.lines.filter { $0.level == .warning && $0.text.contains("unavailable") }.count, 1,
            "retries are not warnings")
    }
}
