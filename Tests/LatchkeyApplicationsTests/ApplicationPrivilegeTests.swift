import LatchkeyApplications
import XCTest

/// `Privileges=` (docs/APPLICATIONS.md): read as strictly as every other key, granted only to an
/// executable, and carried into that executable's grant alone.
final class ApplicationPrivilegeTests: XCTestCase {
    private func parse(_ text: String) throws -> ApplicationDeclaration {
        try ApplicationDeclaration.parse(try KeyFile.parse(Array(text.utf8)))
    }

    private func refusal(_ text: String, line: UInt = #line) -> ApplicationFileError? {
        do {
            XCTFail("accepted: \(try parse(text))", line: line)
            return nil
        } catch {
            guard let error = error as? ApplicationFileError else {
                XCTFail("not an application-file error: \(error)", line: line)
                return nil
            }
            return error
        }
    }

    private let portal =
        "[Application]\nId=org.freedesktop.portal.Desktop\nExecutable=/usr/libexec/xdg-desktop-portal\n"

    func testPortalSecretsIsReadForAnExecutable() throws {
        let declaration = try parse(portal + "AccessGroups=portal\nPrivileges=PortalSecrets\n")
        XCTAssertEqual(declaration.privileges, [.portalSecrets])
        XCTAssertEqual(
            try parse(portal + "AccessGroups=portal\nPrivileges=PortalSecrets;\n").privileges, [.portalSecrets])
        XCTAssertEqual(try parse(portal + "AccessGroups=portal\nPrivileges=\n").privileges, [])
        XCTAssertEqual(try parse(portal + "AccessGroups=portal\n").privileges, [], "none without the key")
    }

    /// An unknown, misspelt or differently cased name refuses the whole file, as an unknown key does:
    /// a privilege that silently did nothing would be reported nowhere.
    func testUnknownRepeatedOrMisplacedPrivilegesAreRefused() {
        for bad in ["portalsecrets", "PortalSecret", "Everything", "Portal Secrets", "X-Mine"] {
            XCTAssertEqual(
                refusal(portal + "AccessGroups=g\nPrivileges=\(bad)\n"), .unknownPrivilege(bad), bad)
        }
        XCTAssertEqual(
            refusal(portal + "AccessGroups=g\nPrivileges=PortalSecrets;PortalSecrets\n"),
            .repeatedPrivilege("PortalSecrets"))
        XCTAssertEqual(
            refusal("[Application]\nId=f\nFlatpakId=org.example.App\nAccessGroups=g\nPrivileges=PortalSecrets\n"),
            .privilegesNeedExecutable)
        XCTAssertEqual(
            refusal("[Application]\nId=s\nSnapName=app\nAccessGroups=g\nPrivileges=PortalSecrets\n"),
            .privilegesNeedExecutable)
        // The key itself is still spelt exactly.
        XCTAssertEqual(refusal(portal + "AccessGroups=g\nPrivilege=PortalSecrets\n"), .unknownKey("Privilege"))
        XCTAssertEqual(refusal(portal + "AccessGroups=g\nprivileges=PortalSecrets\n"), .unknownKey("privileges"))
    }

    /// The shipped file (contrib/applications.d) is a valid declaration granting the portal, and only it.
    func testTheShippedPortalFile() throws {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let file = repository.appendingPathComponent("contrib/applications.d/xdg-desktop-portal.conf")
        let declaration = try ApplicationDeclaration.parse(try KeyFile.parse(Array(try Data(contentsOf: file))))
        XCTAssertEqual(declaration.identifier, .executable("/usr/libexec/xdg-desktop-portal"))
        XCTAssertEqual(declaration.privileges, [.portalSecrets])
        XCTAssertEqual(declaration.accessGroups, ["org.freedesktop.portal.Desktop"])
    }

    /// Only the file's executable, undoubted, gets the privilege: not a doubted run of it, not a
    /// Flatpak or snap, not an unlisted program.
    func testOnlyTheUndoubtedExecutableIsGrantedIt() throws {
        let tree = try RootTree()
        let portalPath = try tree.executable("bin/portal")
        let other = try tree.executable("bin/other")
        try tree.file(
            "apps/portal.conf",
            RootTree.application(id: "portal", executable: portalPath, groups: "portal") + "Privileges=PortalSecrets\n")
        try tree.file("apps/other.conf", RootTree.application(id: "other", executable: other, groups: "other"))
        let registry = tree.registry("apps")
        XCTAssertEqual(registry.ignored, [])
        XCTAssertEqual(registry.applications.first { $0.id == "portal" }?.privileges, [.portalSecrets])
        XCTAssertEqual(registry.grant(for: try tree.identity(running: portalPath)).privileges, [.portalSecrets])
        XCTAssertEqual(registry.grant(for: try tree.identity(running: other)).privileges, [])
        XCTAssertEqual(
            registry.grant(for: try tree.identity(running: portalPath, doubts: [.loaderVariable("LD_PRELOAD")]))
                .privileges, [])
        XCTAssertEqual(
            registry.grant(for: CallerIdentity(uid: 1000, pid: 1, flatpakID: "org.example.App")).privileges, [])
        XCTAssertTrue(
            registry.grant(for: try tree.identity(running: portalPath)).description.contains("+PortalSecrets"))
    }
}
