import Foundation
import XCTest
@testable import Latchkey
import LatchkeyDBus
import LatchkeyTestSupport

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
        let status = SecItemAdd([kSecClass: kSecClassGenericPassword, kSecAttrService: "screen", kSecAttrAccount: account,
                                 kSecAttrAccessible: accessible, kSecValueData: Data("s-\(account)".utf8)] as NSDictionary, nil)
        XCTAssertEqual(status, errSecSuccess, account)
    }

    private func read(_ account: String) -> OSStatus {
        var result: CFTypeRef?
        return SecItemCopyMatching([kSecClass: kSecClassGenericPassword, kSecAttrService: "screen", kSecAttrAccount: account,
                                    kSecReturnData: true] as NSDictionary, &result)
    }

    /// Polls until `read(account)` gives `status`, for at most `seconds`.
    private func waitFor(_ account: String, _ status: OSStatus, within seconds: Double) -> Bool {
        let end = Date().addingTimeInterval(seconds)
        while Date() < end {
            if read(account) == status { return true }
            usleep(20_000)
        }
        return read(account) == status
    }

    private func emitActiveChanged(_ connection: BusConnection, _ active: Bool) throws {
        try connection.sync { bus in
            try bus.emitSignal(path: "/org/freedesktop/ScreenSaver", interface: "org.freedesktop.ScreenSaver",
                               member: "ActiveChanged", [.boolean(active)])
        }
    }

    private func spoof(_ active: Bool) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-send")
        process.arguments = ["--bus=\(sessionBus.address)", "--type=signal", "/org/freedesktop/ScreenSaver",
                             "org.freedesktop.ScreenSaver.ActiveChanged", "boolean:\(active)"]
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
    }

    func testScreenLockDropsWhenUnlockedKeysAndOnlyAuthenticationBringsThemBack() throws {
        try createKeychain()
        add("ak", kSecAttrAccessibleWhenUnlocked as CFString)
        add("ck", kSecAttrAccessibleAfterFirstUnlock as CFString)
        add("aku", kSecAttrAccessibleWhenUnlockedThisDeviceOnly as CFString)

        let screenSaver = try BusConnection(.address(sessionBus.address))
        defer { screenSaver.close() }
        XCTAssertTrue(try screenSaver.sync { try $0.requestName("org.freedesktop.ScreenSaver") })

        // A signal from a client that does not own the name changes nothing.
        try spoof(true)
        usleep(UInt32((grace * 3) * 1_000_000))
        XCTAssertEqual(read("ak"), errSecSuccess, "a spoofed ActiveChanged must be ignored")

        // The real screen saver locks: WhenUnlocked items become unreadable after the grace period,
        // AfterFirstUnlock items stay readable.
        try emitActiveChanged(screenSaver, true)
        XCTAssertTrue(waitFor("ak", errSecInteractionNotAllowed, within: 5), "WhenUnlocked locked within the grace period")
        XCTAssertEqual(read("aku"), errSecInteractionNotAllowed)
        XCTAssertEqual(read("ck"), errSecSuccess)
        XCTAssertEqual(SecItemDelete([kSecClass: kSecClassGenericPassword, kSecAttrAccount: "nothing"] as NSDictionary),
                       errSecItemNotFound, "delete still works while locked")

        // "Unlocked" from the owner is not authentication: the keys stay dropped.
        try emitActiveChanged(screenSaver, false)
        usleep(UInt32((grace * 3) * 1_000_000))
        XCTAssertEqual(read("ak"), errSecInteractionNotAllowed)

        // Re-authentication does bring them back.
        try KeychainControl.unlock(password: .init(copying: Array("pw".utf8)))
        XCTAssertEqual(read("ak"), errSecSuccess)

        // A lock undone within the grace period keeps the keys (a screen locked for a moment).
        try emitActiveChanged(screenSaver, true)
        try emitActiveChanged(screenSaver, false)
        usleep(UInt32((grace * 3) * 1_000_000))
        XCTAssertEqual(read("ak"), errSecSuccess)
    }
}

/// `--idle-lock` / LATCHKEY_IDLE_LOCK: the WhenUnlocked keys are dropped after a time without SecItem use.
final class IdleLockTests: AgentTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        setenv("LATCHKEY_IDLE_LOCK", "0.02", 1)  // minutes: 1.2 s
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
        let item: NSDictionary = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "idle",
                                  kSecAttrAccessible: kSecAttrAccessibleWhenUnlocked, kSecValueData: Data("x".utf8)]
        XCTAssertEqual(SecItemAdd(item, nil), errSecSuccess)
        let query: NSDictionary = [kSecClass: kSecClassGenericPassword, kSecAttrAccount: "idle", kSecReturnData: true]
        var result: CFTypeRef?
        // Steady use keeps it unlocked past the idle limit.
        for _ in 0..<8 {
            XCTAssertEqual(SecItemCopyMatching(query, &result), errSecSuccess)
            usleep(250_000)
        }
        // Then silence: locked within a few seconds, without any request in between (status is not use).
        var locked = false
        for _ in 0..<40 where !locked {
            usleep(100_000)
            locked = (try KeychainControl.status()).classes.first { $0.pdmn == "ak" }?.unlocked == false
        }
        XCTAssertTrue(locked, "WhenUnlocked locked after the idle limit")
        XCTAssertEqual(SecItemCopyMatching(query, &result), errSecInteractionNotAllowed)
    }
}
