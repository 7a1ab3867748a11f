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
