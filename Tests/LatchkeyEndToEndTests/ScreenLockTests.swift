import Foundation
import LatchkeyDBus
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// The agent drops the WhenUnlocked keys when the screen locks (a real dbus-daemon, a real screen-saver
/// name owner), ignores spoofed signals, and never takes an "unlocked" signal as authentication.
final class ScreenLockTests: AgentTestCase {
    private var sessionBus: PrivateBus!
    private let grace = 0.3

    override func setUpWithError() throws {
        try super.setUpWithError()
        sessionBus = try PrivateBus(system: false)
        setenv("DBUS_SESSION_BUS_ADDRESS", sessionBus.address, 1)
        // No logind here: point the system bus at nothing, which the agent logs once and ignores.
        setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=\(sessionBus.directory)/no-system-bus", 1)
        setenv("LATCHKEY_LOCK_GRACE", "\(grace)", 1)
    }

    override func tearDown() {
        super.tearDown()
        sessionBus?.stop()
        unsetenv("DBUS_SESSION_BUS_ADDRESS")
        unsetenv("DBUS_SYSTEM_BUS_ADDRESS")
        unsetenv("LATCHKEY_LOCK_GRACE")
    }

    private func add(_ account: String, _ accessible: CFString) {
        let status = SecItemAdd(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "screen", kSecAttrAccount: account,
                kSecAttrAccessible: accessible, kSecValueData: Data("s-\(account)".utf8),
            ] as NSDictionary, nil)
        XCTAssertEqual(status, errSecSuccess, account)
    }

    private func read(_ account: String) -> OSStatus {
        var result: CFTypeRef?
        return SecItemCopyMatching(
            [
                kSecClass: kSecClassGenericPassword, kSecAttrService: "screen", kSecAttrAccount: account,
                kSecReturnData: true,
            ] as NSDictionary, &result)
    }

    private func emitActiveChanged(_ connection: BusConnection, _ active: Bool) throws {
        try connection.sync { bus in
            try bus.emitSignal(
                path: "/org/freedesktop/ScreenSaver", interface: "org.freedesktop.ScreenSaver",
                member: "ActiveChanged", [.boolean(active)])
        }
    }

    private func agentLog() -> String {
        (try? String(contentsOfFile: runtimeDirectory + "/latchkey/agent.log", encoding: .utf8)) ?? ""
    }

    func testScreenLockDropsWhenUnlockedKeysAndOnlyAuthenticationBringsThemBack() throws {
        try createKeychain()
        add("ak", kSecAttrAccessibleWhenUnlocked as CFString)
        add("ck", kSecAttrAccessibleAfterFirstUnlock as CFString)
        add("aku", kSecAttrAccessibleWhenUnlockedThisDeviceOnly as CFString)

        let screenSaver = try BusConnection(.address(sessionBus.address))
        defer { screenSaver.close() }
        XCTAssertTrue(try screenSaver.sync { try $0.requestName("org.freedesktop.ScreenSaver") })
        // The agent believes the new owner from here on (it logs the change when it handles it).
        try waitUntilAgentHandled(screenSaver)
        XCTAssertTrue(
            agentLog().contains("screen saver org.freedesktop.ScreenSaver is now \(screenSaver.uniqueName)"),
            agentLog())
        let kept = "screen unlocked within the grace period (org.freedesktop.ScreenSaver); keys kept"

        // A signal from a client that does not own the name changes nothing. Had the agent believed it,
        // a lock would now wait out its grace period, and the owner's "unlocked" right after would cancel
        // it and say so; both are handled (in order) before the checks, so no wait is needed.
        let spoofer = try BusConnection(.address(sessionBus.address))
        defer { spoofer.close() }
        try emitActiveChanged(spoofer, true)
        try waitUntilAgentHandled(spoofer)
        try emitActiveChanged(screenSaver, false)
        try waitUntilAgentHandled(screenSaver)
        XCTAssertFalse(agentLog().contains(kept), "a spoofed ActiveChanged must be ignored:\n\(agentLog())")
        XCTAssertEqual(read("ak"), errSecSuccess, "a spoofed ActiveChanged must be ignored")

        // The real screen saver locks: WhenUnlocked items become unreadable after the grace period,
        // AfterFirstUnlock items stay readable.
        try emitActiveChanged(screenSaver, true)
        XCTAssertTrue(
            Poll.until(within: 5) { read("ak") == errSecInteractionNotAllowed },
            "WhenUnlocked locked within the grace period")
        XCTAssertEqual(read("aku"), errSecInteractionNotAllowed)
        XCTAssertEqual(read("ck"), errSecSuccess)
        XCTAssertEqual(
            SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "nothing"] as NSDictionary),
            errSecItemNotFound, "delete still works while locked")

        // "Unlocked" from the owner is not authentication: the keys stay dropped. Once the agent has
        // handled it the keys could only come back with the password, which it no longer has, so there
        // is nothing left to wait for.
        try emitActiveChanged(screenSaver, false)
        try waitUntilAgentHandled(screenSaver)
        XCTAssertEqual(read("ak"), errSecInteractionNotAllowed)

        // Re-authentication does bring them back.
        try KeychainControl.unlock(password: .init(copying: Array("pw".utf8)))
        XCTAssertEqual(read("ak"), errSecSuccess)

        // A lock undone within the grace period keeps the keys (a screen locked for a moment).
        try emitActiveChanged(screenSaver, true)
        try emitActiveChanged(screenSaver, false)
        try waitUntilAgentHandled(screenSaver)
        XCTAssertTrue(agentLog().contains(kept), agentLog())
        // That the cancelled lock never fires is a negative no event announces. The agent received the
        // lock before now, so had it not been cancelled it would fire within one grace period from now;
        // the keys must outlast that, plus a margin for the timer thread and the lock itself.
        XCTAssertTrue(Poll.holds(for: grace + 0.2) { read("ak") == errSecSuccess }, "the keys are kept")
    }
}

/// `--idle-lock` / LATCHKEY_IDLE_LOCK: the WhenUnlocked keys are dropped after a time without SecItem use.
final class IdleLockTests: AgentTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        setenv("LATCHKEY_IDLE_LOCK", "0.01", 1)  // minutes: 0.6 s
        setenv("DBUS_SESSION_BUS_ADDRESS", "unix:path=/nonexistent/bus", 1)
        setenv("DBUS_SYSTEM_BUS_ADDRESS", "unix:path=/nonexistent/bus", 1)
    }

    override func tearDown() {
        super.tearDown()
        unsetenv("LATCHKEY_IDLE_LOCK")
        unsetenv("DBUS_SESSION_BUS_ADDRESS")
        unsetenv("DBUS_SYSTEM_BUS_ADDRESS")
    }

    func testIdleKeychainLocksWhenUnlockedClasses() throws {
        try createKeychain()
        let item: NSDictionary = [
            kSecClass: kSecClassGenericPassword, kSecAttrAccount: "idle",
            kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked, kSecValueData: Data("x".utf8),
        ]
        XCTAssertEqual(SecItemAdd(item, nil), errSecSuccess)
        let query: NSDictionary = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "idle", kSecReturnData: true]
        var result: CFTypeRef?
        // Steady use keeps it unlocked past the idle limit: a request every 0.1 s for 0.8 s. These sleeps
        // are the use being tested, not a wait for the agent; each gap is a sixth of the limit, so a
        // loaded machine would have to stall a request for half a second to lock it early.
        for _ in 0..<8 {
            XCTAssertEqual(SecItemCopyMatching(query, &result), errSecSuccess)
            usleep(100_000)
        }
        // Then silence: locked soon after the limit, without any request in between (status is not use).
        XCTAssertTrue(
            try Poll.until(within: 5) {
                try KeychainControl.status().classes.first { $0.pdmn == "ak" }?.unlocked == false
            }, "WhenUnlocked locked after the idle limit")
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecInteractionNotAllowed)
    }
}
