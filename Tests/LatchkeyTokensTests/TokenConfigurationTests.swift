import Foundation
import XCTest

@testable import LatchkeyTokens

/// tokens.conf: what it may say, who may write it, and who may name another one.
final class TokenConfigurationTests: XCTestCase {
    func testParsesModulesSystemModulesRestartAndPolling() {
        var warnings: [String] = []
        let parsed = TokenConfiguration.parse(
            """
            # comment
            system-modules = no
            module = /usr/lib/softhsm/libsofthsm2.so   # trailing comment
            module = relative.so
            restart = softhsm2
            poll-seconds = 2
            poll-seconds = 0
            nonsense
            colour = blue
            """, warnings: &warnings)
        XCTAssertFalse(parsed.systemModules)
        XCTAssertEqual(parsed.modules, ["/usr/lib/softhsm/libsofthsm2.so"])
        XCTAssertEqual(parsed.restart, ["softhsm2"])
        XCTAssertEqual(parsed.pollSeconds, 2)
        // A relative module, a poll interval out of range, a line without "=" and an unknown key.
        XCTAssertEqual(warnings.count, 4, "\(warnings)")
    }

    func testAUsersAgentIgnoresTheVariable() throws {
        let file = NSTemporaryDirectory() + "tokens-\(UUID().uuidString).conf"
        try "system-modules = no\n".write(toFile: file, atomically: true, encoding: .utf8)
        defer { unlink(file) }
        setenv(TokenConfiguration.variable, file, 1)
        defer { unsetenv(TokenConfiguration.variable) }
        let (asUser, userWarnings) = TokenConfiguration.load(euid: 1000)
        XCTAssertTrue(asUser.systemModules, "a user's agent must not read the named file")
        XCTAssertTrue(userWarnings.contains { $0.contains("ignored") })
        guard geteuid() == 0 else { return }
        let (asRoot, _) = TokenConfiguration.load(euid: 0)
        XCTAssertFalse(asRoot.systemModules)
    }

    func testFilesNotOwnedByRootOrWritableByOthersAreRefused() throws {
        try XCTSkipUnless(geteuid() == 0, "needs root to make files of other owners")
        let directory = NSTemporaryDirectory() + "tokens-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let module = directory + "/module.so"
        try Data([0]).write(to: URL(fileURLWithPath: module))
        chmod(module, 0o644)
        XCTAssertTrue(TokenConfiguration.isRootOnly(module))
        chmod(module, 0o666)
        XCTAssertFalse(TokenConfiguration.isRootOnly(module), "writable by others")
        chmod(module, 0o644)
        chown(module, 65534, 65534)
        XCTAssertFalse(TokenConfiguration.isRootOnly(module), "owned by nobody")
        chown(module, 0, 0)
        chmod(directory, 0o777)
        XCTAssertFalse(TokenConfiguration.isRootOnly(module), "in a directory others may write without the sticky bit")
        chmod(directory, 0o1777)
        XCTAssertTrue(TokenConfiguration.isRootOnly(module), "a sticky directory (/tmp) keeps root's entries root's")
        let link = directory + "/link.so"
        symlink("/nonexistent", link)
        XCTAssertFalse(TokenConfiguration.isRootOnly(link))
    }

    func testModuleNames() {
        XCTAssertEqual(TokenService.name(ofPath: "/usr/lib/softhsm/libsofthsm2.so"), "softhsm2")
        XCTAssertEqual(TokenService.name(ofPath: "/usr/lib/x86_64-linux-gnu/opensc-pkcs11.so"), "opensc-pkcs11")
    }
}

/// The system's module files, as the agent reads them instead of p11-kit (which would add the user's).
final class SystemModulesTests: XCTestCase {
    func testModuleFilesAreReadWithTheirProgramRulesAndTrustModulesAreLeftOut() throws {
        try XCTSkipUnless(FileManager.default.fileExists(atPath: "/usr/lib/softhsm/libsofthsm2.so"), "softhsm2")
        let softhsm = "module: /usr/lib/softhsm/libsofthsm2.so\n"
        XCTAssertEqual(
            try SystemModules.entry(name: "softhsm2", text: "# c\n" + softhsm).get(),
            SystemModules.Entry(name: "softhsm2", path: "/usr/lib/softhsm/libsofthsm2.so"))
        XCTAssertThrowsError(try SystemModules.entry(name: "t", text: softhsm + "trust-policy: yes\n").get())
        XCTAssertThrowsError(
            try SystemModules.entry(name: "d", text: softhsm + "disable-in: latchkeyd, firefox\n").get())
        XCTAssertThrowsError(try SystemModules.entry(name: "e", text: softhsm + "enable-in: firefox\n").get())
        XCTAssertNoThrow(try SystemModules.entry(name: "e", text: softhsm + "enable-in: firefox,latchkeyd\n").get())
        XCTAssertThrowsError(try SystemModules.entry(name: "n", text: "priority: 1\n").get(), "no module")
        XCTAssertThrowsError(
            try SystemModules.entry(name: "tmp", text: "module: /tmp/not-a-module.so\n").get(), "not root's alone")
    }

    func testTheUsersConfigurationIsNotAmongTheSystemModules() throws {
        // A user's p11-kit configuration, which p11_kit_modules_load would load for a user's agent.
        let home = NSTemporaryDirectory() + "home-\(UUID().uuidString)"
        try FileManager.default.createDirectory(
            atPath: home + "/.config/pkcs11/modules", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        try "module: /usr/lib/softhsm/libsofthsm2.so\n".write(
            toFile: home + "/.config/pkcs11/modules/usermod.module", atomically: true, encoding: .utf8)
        let saved = getenv("HOME").map { String(cString: $0) }
        setenv("HOME", home, 1)
        defer { if let saved { setenv("HOME", saved, 1) } else { unsetenv("HOME") } }
        let (modules, _) = SystemModules.list()
        XCTAssertFalse(modules.contains { $0.name == "usermod" }, "a module of the user's configuration")
        for module in modules { XCTAssertTrue(TokenConfiguration.isRootOnly(module.path), module.path) }
        XCTAssertFalse(modules.contains { $0.name == "p11-kit-trust" }, "the trust module holds CAs, not tokens")
    }
}
