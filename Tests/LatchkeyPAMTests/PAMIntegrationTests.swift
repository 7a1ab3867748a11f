import Foundation
import LatchkeyDBus
import LatchkeyKeybag
import LatchkeySecrets
import LatchkeyTestSupport
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// pam_latchkey end to end: real PAM (pamtester, and `login` for sessions that stay open), real
/// pam_unix, the real agent.
final class PAMIntegrationTests: PAMTestCase {
    /// (a) A login hands the key to the running agent: a locked keychain becomes readable.
    func testLoginUnlocksTheKeychain() throws {
        try createKeychainWithItem()
        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        XCTAssertNil(try readItem(), "precondition: the item is locked")
        let service = try standardService()

        let login = try self.login(service, input: password + "\n")
        XCTAssertEqual(login.status, 0, login.err)
        XCTAssertEqual(try readItem(), "s3cret", "the hand-off did not unlock the keychain")
        XCTAssertEqual(try classState("ak"), "unlocked")
        XCTAssertFalse(FileManager.default.fileExists(atPath: markerPath))
    }

    /// (b) A wrong password: the PAM result is exactly what the stack without the module gives, and
    /// the keychain stays locked. With `required` pam_unix the module still runs and sees the wrong
    /// password, and must not unlock anything or write the marker (no session was opened).
    func testWrongPasswordLeavesResultAndKeychainAlone() throws {
        try createKeychainWithItem()
        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        let without = try installService(["auth required pam_unix.so", "session required pam_unix.so"])
        let with = try installService([
            "auth required pam_unix.so", moduleLine("auth"),
            "session required pam_unix.so", moduleLine("session", "optional", "auto_create"),
        ])
        for input in ["wrong-password\n", password + "x\n"] {
            let baseline = try pamtester(without, ["authenticate", "open_session"], input: input)
            let result = try pamtester(with, ["authenticate", "open_session"], input: input)
            XCTAssertNotEqual(baseline.status, 0)
            XCTAssertEqual(
                result.status, baseline.status, "pam_latchkey changed the PAM result for \(input.debugDescription)")
        }
        XCTAssertNil(try readItem(), "a wrong password unlocked the keychain")
        XCTAssertEqual(try classState("ck"), "locked")
        XCTAssertFalse(FileManager.default.fileExists(atPath: markerPath), "marker written without a session")

        // And the right password through the same stack does not fare worse either.
        let good = try pamtester(with, ["authenticate", "open_session"], input: password + "\n")
        XCTAssertEqual(good.status, 0, good.err)
    }

    /// A damaged keychain, a missing agent, even `required`: the module never fails a login.
    func testBrokenKeychainNeverFailsTheLogin() throws {
        try FileManager.default.createDirectory(atPath: keychainDirectory, withIntermediateDirectories: true)
        try Data("LKKEYBAG garbage".utf8).write(to: URL(fileURLWithPath: keybagPath))
        _ = try Self.run(["/bin/chown", "-R", "\(uid):\(gid)", home + "/.local"])
        let service = try installService([
            "auth requisite pam_unix.so",
            "auth required \(Self.modulePath) \(moduleOptions) agent=/nonexistent/latchkeyd",
            "session required pam_unix.so",
            "session required \(Self.modulePath) \(moduleOptions) agent=/nonexistent/latchkeyd auto_create",
            "password required pam_unix.so",
            "password required \(Self.modulePath) \(moduleOptions)",
        ])
        let login = try pamtester(service, ["authenticate", "open_session", "close_session"], input: password + "\n")
        XCTAssertEqual(login.status, 0, login.err)
        XCTAssertEqual(keybagBytes(), Array("LKKEYBAG garbage".utf8), "the damaged keybag was touched")
    }

    /// (c) passwd with the old and the new password re-wraps the keychain: the new password opens
    /// it, the old one does not, the class keys (so the items) and the Always entries are unchanged.
    func testPasswordChangeRewrapsTheKeychain() throws {
        try createKeychainWithItem()
        let before = try XCTUnwrap(keybagBytes())
        let service = try standardService()
        let newPassword = "Lk-second-pass-2"

        // As root pam_unix asks for the old password only for an expired-token change.
        let change = try pamtester(
            service, ["chauthtok(PAM_CHANGE_EXPIRED_AUTHTOK)"],
            input: "\(password)\n\(newPassword)\n\(newPassword)\n")
        XCTAssertEqual(change.status, 0, change.out + change.err)
        let after = try XCTUnwrap(keybagBytes())
        XCTAssertEqual(after.count, 580)
        XCTAssertNotEqual(after, before, "the keybag was not re-wrapped")
        XCTAssertEqual(after[12..<28], before[12..<28], "keybag id changed")
        XCTAssertNotEqual(after[40..<56], before[40..<56], "salt not renewed")
        for alwaysClass in [3, 6] {
            let entry = (121 + 61 * (alwaysClass - 1))..<(121 + 61 * alwaysClass)
            XCTAssertEqual(after[entry], before[entry], "Always entry \(alwaysClass) changed")
        }
        XCTAssertTrue(try keybagOpens(with: newPassword), "the new password does not open the keybag")
        XCTAssertFalse(try keybagOpens(with: password), "the old password still opens the keybag")
        XCTAssertFalse(FileManager.default.fileExists(atPath: markerPath))
        let info = try XCTUnwrap(fileInfo(keybagPath))
        XCTAssertEqual(info.st_uid, uid)
        XCTAssertEqual(info.st_mode & 0o7777, 0o600)

        // A login with the new password unlocks; the old one opens nothing any more.
        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        XCTAssertNotEqual(try cli(["unlock", "--password-stdin"], input: password + "\n").status, 0)
        let login = try self.login(service, input: newPassword + "\n")
        XCTAssertEqual(login.status, 0, login.err)
        XCTAssertEqual(try readItem(), "s3cret")
    }

    /// (d) root's `passwd USER` gives no old password: the keybag stays byte for byte (it still opens
    /// with the old password), and the out-of-step marker appears. A later login whose password opens
    /// the keychain removes it.
    func testPasswordChangeWithoutOldPasswordMarksOutOfStep() throws {
        try createKeychainWithItem()
        let before = try XCTUnwrap(keybagBytes())
        let service = try standardService()
        let newPassword = "Lk-root-set-3"

        let change = try pamtester(service, ["chauthtok"], input: "\(newPassword)\n\(newPassword)\n")
        XCTAssertEqual(change.status, 0, change.out + change.err)
        XCTAssertEqual(keybagBytes(), before, "the keybag changed without the old password")
        XCTAssertTrue(try keybagOpens(with: password))
        let marker = try XCTUnwrap(fileInfo(markerPath), "no password-out-of-step marker")
        XCTAssertEqual(marker.st_uid, uid)
        XCTAssertEqual(marker.st_mode & 0o7777, 0o600)
        let text = try String(contentsOfFile: markerPath, encoding: .utf8)
        XCTAssertTrue(text.contains("latchkey passwd"), text)

        // Logging in with the new login password: the login works, the keychain stays locked.
        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        let login = try pamtester(service, ["authenticate", "open_session"], input: newPassword + "\n")
        XCTAssertEqual(login.status, 0, login.err)
        XCTAssertNil(try readItem())
        XCTAssertNotNil(fileInfo(markerPath))

        // Back in step (the login password is the keychain's again): the next login clears the marker.
        try setLoginPassword(password)
        let again = try self.login(service, input: password + "\n")
        XCTAssertEqual(again.status, 0, again.err)
        XCTAssertEqual(try readItem(), "s3cret")
        XCTAssertNil(fileInfo(markerPath), "the marker survived a login that opened the keychain")
    }

    /// (e) auto_create: the first login creates a device-bound keybag as the user, starts the agent,
    /// and the agent serves it, ThisDeviceOnly classes included. (auth derives the key: Linux-PAM
    /// has dropped PAM_AUTHTOK by the time the session opens.)
    func testAutoCreateOnFirstLogin() throws {
        XCTAssertNil(keybagBytes())
        let service = try standardService(authExtra: "auto_create", sessionExtra: "auto_create")
        let login = try self.login(service, input: password + "\n")
        XCTAssertEqual(login.status, 0, login.err)

        let keybag = try parsedKeybag()
        XCTAssertTrue(keybag.isDeviceBound, "auto_create made an unbound keybag")
        XCTAssertEqual(keybag.parameters.memoryKiB, 8192)
        let info = try XCTUnwrap(fileInfo(keybagPath))
        XCTAssertEqual(info.st_uid, uid)
        XCTAssertEqual(info.st_mode & 0o7777, 0o600)
        let directory = try XCTUnwrap(fileInfo(keychainDirectory))
        XCTAssertEqual(directory.st_uid, uid)
        XCTAssertEqual(directory.st_mode & 0o7777, 0o700)
        let secret = try XCTUnwrap(fileInfo(machineSecret), "no machine secret")
        XCTAssertEqual(secret.st_uid, 0)
        XCTAssertEqual(secret.st_mode & 0o7777, 0o600)
        XCTAssertEqual(secret.st_size, 32)

        // The Swift keybag code opens the C-made keybag with the password and the device factor.
        let machine = try XCTUnwrap(FileManager.default.contents(atPath: machineSecret))
        let factor = try keybag.deviceFactor(machineSecret: SecretBytes(copying: Array(machine)), uid: UInt32(uid))
        let master = try keybag.deriveMasterKey(password: SecretBytes(copying: Array(password.utf8)))
        XCTAssertEqual(try keybag.unlockPasswordClasses(masterKey: master, deviceFactor: factor).classes.count, 5)

        // The agent was started by the module and holds every class.
        XCTAssertFalse(userPIDs().isEmpty, "no agent runs for the user")
        for pdmn in ["ak", "ck", "aku", "cku", "akpu"] {
            XCTAssertEqual(try classState(pdmn), "unlocked", pdmn)
        }
        let add = try cli(
            [
                "add-generic-password", "-s", "mail", "-a", user, "--password-stdin",
                "--accessible", "when-unlocked-this-device-only",
            ], input: "s3cret\n")
        XCTAssertEqual(add.status, 0, add.err)
        XCTAssertEqual(try readItem(), "s3cret")

        // A second login does not create anything new.
        XCTAssertEqual(try cli(["lock", "--all"]).status, 0)
        let keybagBefore = keybagBytes()
        XCTAssertEqual(try self.login(service, input: password + "\n").status, 0)
        XCTAssertEqual(keybagBytes(), keybagBefore)
        XCTAssertEqual(try readItem(), "s3cret")
    }

    /// A refused login creates nothing, even with auto_create on both lines (auth ran, with the wrong
    /// password, but no session opened); auto_create on the session line alone cannot create.
    func testAutoCreateNeedsAnAcceptedLoginAndTheAuthLine() throws {
        let refused = try installService([
            "auth required pam_unix.so", moduleLine("auth", "optional", "auto_create"),
            "session required pam_unix.so", moduleLine("session", "optional", "auto_create"),
        ])
        XCTAssertNotEqual(
            try pamtester(refused, ["authenticate", "open_session"], input: "wrong-password\n").status, 0)
        XCTAssertNil(keybagBytes(), "a refused login created a keychain")

        let sessionOnly = try standardService(sessionExtra: "auto_create")
        XCTAssertEqual(try pamtester(sessionOnly, ["authenticate", "open_session"], input: password + "\n").status, 0)
        XCTAssertNil(keybagBytes(), "created without a key derived at authentication")
    }

    /// The module starts only an agent nobody but root can have written: a root-owned latchkeyd in a
    /// directory the user owns could be swapped for anything, so it is not run (the login still works).
    func testAgentInADirectoryOthersCanWriteIsNotStarted() throws {
        try createKeychainWithItem()
        stopUserProcesses()
        let userBin = base + "/user-bin"
        try installAgent(at: userBin + "/latchkeyd")
        XCTAssertEqual(chown(userBin, uid, gid), 0)
        let service = try installService([
            "auth requisite pam_unix.so",
            moduleLine("auth", "optional", "agent=\(userBin)/latchkeyd"),
            "session required pam_unix.so",
            moduleLine("session", "optional", "agent=\(userBin)/latchkeyd"),
        ])
        let login = try pamtester(service, ["authenticate", "open_session"], input: password + "\n")
        XCTAssertEqual(login.status, 0, login.err)
        XCTAssertTrue(userPIDs().isEmpty, "an agent in a directory the user can write was started")

        // The same binary where only root can change it is started, and unlocks.
        let trusted = try standardService()
        XCTAssertEqual(try self.login(trusted, input: password + "\n").status, 0)
        XCTAssertFalse(userPIDs().isEmpty, "the trusted agent was not started")
        XCTAssertEqual(try readItem(), "s3cret")
    }

    /// (f) Sessions are counted: closing one of two keeps the keys; closing the last locks every
    /// password class (the Always classes stay).
    func testClosingTheLastSessionLocksPasswordClasses() throws {
        try createKeychainWithItem()
        stopUserProcesses()  // the module starts its own agent for the sessions
        let service = try standardService()

        // Session 1 stays open (its login process lives on; a login process that exits ends its session).
        XCTAssertEqual(try self.login(service, input: password + "\n").status, 0)
        // Session 2 opens and closes: one session is still open.
        XCTAssertEqual(
            try pamtester(
                service, ["authenticate", "open_session", "close_session"],
                input: password + "\n"
            ).status, 0)
        XCTAssertEqual(try classState("ck"), "unlocked", "closing one of two sessions locked the keychain")
        XCTAssertEqual(try readItem(), "s3cret")

        // A fresh agent, one session, closed: the last session's close locks.
        stopUserProcesses()
        XCTAssertEqual(
            try pamtester(
                service, ["authenticate", "open_session", "close_session"],
                input: password + "\n"
            ).status, 0)
        for pdmn in ["ak", "ck", "aku", "cku", "akpu"] {
            XCTAssertEqual(try classState(pdmn), "locked", pdmn)
        }
        XCTAssertEqual(try classState("dk"), "unlocked")
        XCTAssertNil(try readItem())
    }

    /// A screen locker runs PAM as the user: the module reads the keybag in-process, finds the agent
    /// through the user's own XDG_RUNTIME_DIR and hands over M (without DF: only root reads the
    /// machine secret), so the WhenUnlocked class comes back.
    func testScreenLockerAsTheUserUnlocksWhenUnlocked() throws {
        try createKeychainWithItem()
        XCTAssertEqual(try cli(["lock"]).status, 0)
        XCTAssertNil(try readItem())
        let service = try installService([
            "auth requisite pam_unix.so",
            "auth optional \(Self.modulePath) agent=\(agentPath) debug",
        ])
        let unlock = try asUser([Self.pamtester, service, user, "authenticate"], input: password + "\n")
        XCTAssertEqual(unlock.status, 0, unlock.err)
        XCTAssertEqual(try readItem(), "s3cret")
    }

    /// (b of the issue's list) A screen lock on the user's session bus drops the WhenUnlocked keys of
    /// the agent the login started (within its grace period, default 5 s) while AfterFirstUnlock items
    /// still read; the screen locker's PAM authentication (as the user, without the machine secret)
    /// brings WhenUnlocked back, ThisDeviceOnly included, thanks to the factor held since the login.
    func testScreenLockSignalThenScreenLockerAuthentication() throws {
        try createKeychainWithItem()
        XCTAssertEqual(
            try cli(
                [
                    "add-generic-password", "-s", "afu", "-a", user, "--password-stdin",
                    "--accessible", "after-first-unlock",
                ], input: "kept\n"
            ).status, 0)
        stopUserProcesses()
        // The user's session bus where sd-bus looks for it ($XDG_RUNTIME_DIR/bus); this test process
        // (root) owns the screen-saver name on it.
        let bus = try PrivateBus(system: false, socketPath: runtime + "/bus", allowAnyUser: true)
        defer { bus.stop() }

        let service = try standardService()
        XCTAssertEqual(try self.login(service, input: password + "\n").status, 0)
        XCTAssertEqual(try readItem(), "s3cret")
        let aku = try cli(
            [
                "add-generic-password", "-s", "device", "-a", user, "--password-stdin",
                "--accessible", "when-unlocked-this-device-only",
            ], input: "bound\n")
        XCTAssertEqual(aku.status, 0, aku.err)

        let screenSaver = try BusConnection(.address(bus.address))
        defer { screenSaver.close() }
        XCTAssertTrue(try screenSaver.sync { try $0.requestName("org.freedesktop.ScreenSaver") })
        // The agent the login started subscribes to the session bus on its own thread, and a signal sent
        // before that is lost to it; so the screen saver repeats "active" until the lock shows. A repeat
        // does not restart the grace period (5 s; allow 15 in all).
        var locked = false
        for attempt in 0..<150 where !locked {
            if attempt % 10 == 0 {
                try screenSaver.sync { bus in
                    try bus.emitSignal(
                        path: "/org/freedesktop/ScreenSaver", interface: "org.freedesktop.ScreenSaver",
                        member: "ActiveChanged", [.boolean(true)])
                }
            }
            usleep(100_000)
            locked = try classState("ak") == "locked"
        }
        XCTAssertTrue(locked, "WhenUnlocked was not locked after the screen lock")
        XCTAssertNil(try readItem())
        XCTAssertEqual(try cli(["find-generic-password", "-s", "afu", "-a", user, "-w"]).out, "kept\n")

        // The screen locker authenticates as the user.
        let locker = try installService([
            "auth requisite pam_unix.so",
            "auth optional \(Self.modulePath) agent=\(agentPath) debug",
        ])
        let unlock = try asUser([Self.pamtester, locker, user, "authenticate"], input: password + "\n")
        XCTAssertEqual(unlock.status, 0, unlock.err)
        XCTAssertEqual(try readItem(), "s3cret")
        XCTAssertEqual(try cli(["find-generic-password", "-s", "device", "-a", user, "-w"]).out, "bound\n")
    }
}
