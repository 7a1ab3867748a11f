import LatchkeyApplications
import XCTest

/// What an application file must hold, before the file system is consulted.
final class ApplicationDeclarationTests: XCTestCase {
    private func declaration(_ text: String) throws -> ApplicationDeclaration {
        try ApplicationDeclaration.parse(try KeyFile.parse(Array(text.utf8)))
    }

    private func refusal(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> ApplicationFileError? {
        do {
            let parsed = try declaration(text)
            XCTFail("accepted: \(parsed)", file: file, line: line)
            return nil
        } catch let error as ApplicationFileError {
            return error
        } catch {
            XCTFail("not an application-file error: \(error)", file: file, line: line)
            return nil
        }
    }

    func testTheThreeKindsOfApplication() throws {
        XCTAssertEqual(
            try declaration(RootTree.application(id: "org.example.Mail", executable: "/usr/bin/mail", groups: "a;b")),
            ApplicationDeclaration(
                id: "org.example.Mail", identifier: .executable("/usr/bin/mail"), accessGroups: ["a", "b"]))
        XCTAssertEqual(
            try declaration(RootTree.application(id: "fp", flatpak: "org.gnome.Evolution", groups: "mail;")),
            ApplicationDeclaration(id: "fp", identifier: .flatpak("org.gnome.Evolution"), accessGroups: ["mail"]))
        XCTAssertEqual(
            try declaration(RootTree.application(id: "s", snap: "thunderbird", groups: "mail")),
            ApplicationDeclaration(id: "s", identifier: .snap("thunderbird"), accessGroups: ["mail"]))
    }

    func testExtensionsAreIgnoredAndUnknownNamesRefused() throws {
        let text = "[Application]\nId=a\nSnapName=ab\nAccessGroups=g\nX-Note=hello\nComment[de]=x\n[X-Vendor]\nK=v\n"
        XCTAssertEqual(try declaration(text).accessGroups, ["g"])
        XCTAssertEqual(
            refusal("[Application]\nId=a\nSnapName=ab\nAccessGroups=g\nAccesGroups=h\n"), .unknownKey("AccesGroups"))
        XCTAssertEqual(
            refusal("[Application]\nId=a\nSnapName=ab\nAccessGroups=g\n[Desktop Entry]\n"),
            .unknownGroup("Desktop Entry"))
        XCTAssertEqual(refusal("[X-Only]\nK=v\n"), .missingGroup)
    }

    func testRequiredKeysAndExactlyOneIdentifier() {
        XCTAssertEqual(refusal("[Application]\nSnapName=ab\nAccessGroups=g\n"), .missingKey("Id"))
        XCTAssertEqual(refusal("[Application]\nId=a\nSnapName=ab\n"), .missingKey("AccessGroups"))
        XCTAssertEqual(refusal("[Application]\nId=a\nAccessGroups=g\n"), .noIdentifier)
        XCTAssertEqual(
            refusal("[Application]\nId=a\nExecutable=/bin/x\nSnapName=ab\nAccessGroups=g\n"),
            .severalIdentifiers(["Executable", "SnapName"]))
        XCTAssertEqual(
            refusal("[Application]\nId=a\nFlatpakId=a.b.c\nSnapName=ab\nExecutable=/x\nAccessGroups=g\n"),
            .severalIdentifiers(["Executable", "FlatpakId", "SnapName"]))
    }

    func testIDs() {
        for bad in ["", "-a", ".a", "a b", "a/b", "ä", String(repeating: "a", count: 256)] {
            XCTAssertEqual(refusal("[Application]\nId=\(bad)\nSnapName=ab\nAccessGroups=g\n"), .invalidID(bad), bad)
        }
        XCTAssertTrue(ApplicationNames.isValidApplicationID("0rg.example_x-y"))
        XCTAssertTrue(ApplicationNames.isValidApplicationID(String(repeating: "a", count: 255)))
    }

    func testExecutablePathsMustBeAbsoluteAndNormalized() {
        for bad in [
            "usr/bin/x", "/", "/usr//bin/x", "/usr/bin/", "/usr/./bin/x", "/usr/../bin/x", "/usr/bin/..", "/a/\\tb",
            "/a/\\nb", "/" + String(repeating: "a", count: 4095),
        ] {
            let expected = bad.replacingOccurrences(of: "\\t", with: "\t").replacingOccurrences(of: "\\n", with: "\n")
            XCTAssertEqual(
                refusal("[Application]\nId=a\nExecutable=\(bad)\nAccessGroups=g\n"), .invalidExecutable(expected), bad)
        }
        XCTAssertTrue(ApplicationNames.isValidExecutablePath("/usr/bin/x"))
        XCTAssertTrue(ApplicationNames.isValidExecutablePath("/opt/My App/bin/..x"))
        XCTAssertTrue(ApplicationNames.isValidExecutablePath("/" + String(repeating: "a", count: 4094)))
    }

    func testFlatpakIDsAndSnapNames() {
        for bad in ["org.example", "org..x", "1org.example.x", "org.example.x y", "org.-x.y", ".a.b.c"] {
            XCTAssertFalse(ApplicationNames.isValidFlatpakID(bad), bad)
            XCTAssertEqual(
                refusal("[Application]\nId=a\nFlatpakId=\(bad)\nAccessGroups=g\n"), .invalidFlatpakID(bad), bad)
        }
        for good in ["org.example.App", "org.example.App-Devel", "_a.b.c", "com.x.y.z"] {
            XCTAssertTrue(ApplicationNames.isValidFlatpakID(good), good)
        }
        for bad in ["a", "Firefox", "-ab", "ab-", "a--b", "12", "a_b", "a.b", String(repeating: "a", count: 41)] {
            XCTAssertFalse(ApplicationNames.isValidSnapName(bad), bad)
            XCTAssertEqual(
                refusal("[Application]\nId=a\nSnapName=\(bad)\nAccessGroups=g\n"), .invalidSnapName(bad), bad)
        }
        for good in ["ab", "firefox", "1password", "go-1-2", String(repeating: "a", count: 40)] {
            XCTAssertTrue(ApplicationNames.isValidSnapName(good), good)
        }
    }

    func testAccessGroups() {
        func groups(_ value: String) -> String { "[Application]\nId=a\nSnapName=ab\nAccessGroups=\(value)\n" }
        XCTAssertEqual(refusal(groups("")), .noAccessGroups)
        XCTAssertEqual(refusal(groups(";")), .invalidAccessGroup(""))
        XCTAssertEqual(refusal(groups("a;;b")), .invalidAccessGroup(""))
        XCTAssertEqual(refusal(groups("a;\\sb")), .invalidAccessGroup(" b"))
        XCTAssertEqual(refusal(groups("a;b\\s")), .invalidAccessGroup("b "))
        XCTAssertEqual(refusal(groups("a\\nb")), .invalidAccessGroup("a\nb"))
        XCTAssertEqual(refusal(groups("a\u{202E}b")), .invalidAccessGroup("a\u{202E}b"), "a bidirectional override")
        XCTAssertEqual(refusal(groups("a\u{200B}b")), .invalidAccessGroup("a\u{200B}b"), "a zero-width space")
        XCTAssertEqual(
            refusal(groups(String(repeating: "g", count: 256))), .invalidAccessGroup(String(repeating: "g", count: 256))
        )
        XCTAssertEqual(refusal(groups("a;b;a")), .repeatedAccessGroup("a"))
        // Two spellings of "café" (precomposed, combining accent) are two groups, as the store keeps them.
        XCTAssertEqual(
            try declaration(groups("caf\u{E9};cafe\u{301}")).accessGroups.map { Array($0.utf8) },
            [Array("caf\u{E9}".utf8), Array("cafe\u{301}".utf8)])
        let tooMany = (0...ApplicationNames.maximumGroups).map { "g\($0)" }.joined(separator: ";")
        XCTAssertEqual(refusal(groups(tooMany)), .tooManyAccessGroups(limit: ApplicationNames.maximumGroups))
        XCTAssertNoThrow(
            try declaration(groups((1...ApplicationNames.maximumGroups).map { "g\($0)" }.joined(separator: ";"))))
        XCTAssertEqual(
            try? declaration(groups("Team Mail;é\\;x;\(String(repeating: "g", count: 255))")).accessGroups,
            ["Team Mail", "é;x", String(repeating: "g", count: 255)], "inner spaces, non-ASCII and escaped ';' are fine"
        )
    }

    func testABadEscapeInAValueIsRefused() {
        XCTAssertEqual(
            refusal("[Application]\nId=a\\q\nSnapName=ab\nAccessGroups=g\n"),
            .value(KeyFileError(line: 2, .badEscape(key: "Id"))))
    }
}
