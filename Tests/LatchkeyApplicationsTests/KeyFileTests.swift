import LatchkeyApplications
import XCTest

/// The key-file parser: the freedesktop syntax, read whole or refused with a reason and a line.
final class KeyFileTests: XCTestCase {
    private func parse(_ text: String) throws -> KeyFile {
        try KeyFile.parse(Array(text.utf8))
    }

    /// The problem `text` is refused with, and its line.
    private func refusal(_ text: String, file: StaticString = #filePath, line: UInt = #line) -> KeyFileError? {
        refusal(Array(text.utf8), file: file, line: line)
    }

    private func refusal(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> KeyFileError? {
        do {
            let parsed = try KeyFile.parse(bytes)
            XCTFail("accepted: \(parsed)", file: file, line: line)
            return nil
        } catch {
            return error
        }
    }

    func testGroupsEntriesCommentsAndBlankLines() throws {
        let file = try parse(
            """
            # A comment before the first group.

            [Application]
            Id=org.example.Mail
              Executable = /usr/bin/mail
            # Another comment.
            AccessGroups=mail;shared;

            [X-Vendor]
            Note=anything
            """)
        XCTAssertEqual(file.groups.map(\.name), ["Application", "X-Vendor"])
        let application = try XCTUnwrap(file.group("Application"))
        XCTAssertEqual(application.keys, ["Id", "Executable", "AccessGroups"])
        XCTAssertEqual(application.entries["Executable"], "/usr/bin/mail", "white space around = is not part of it")
        XCTAssertEqual(application.lines["AccessGroups"], 7)
        XCTAssertEqual(try application.list("AccessGroups"), ["mail", "shared"])
        XCTAssertEqual(file.group("X-Vendor")?.entries, ["Note": "anything"])
        XCTAssertNil(file.group("Missing"))
    }

    func testAFileWithoutAFinalNewlineAndAnEmptyFile() throws {
        XCTAssertEqual(try parse("[A]\nK=v").group("A")?.entries, ["K": "v"])
        XCTAssertEqual(try parse("").groups, [])
        XCTAssertEqual(try parse("# only a comment\n\n").groups, [])
    }

    func testEscapesInStrings() throws {
        let group = try XCTUnwrap(try parse("[A]\nK=\\sa\\tb\\nc\\rd\\\\e\\s\nEmpty=\n").group("A"))
        XCTAssertEqual(try group.string("K"), " a\tb\nc\rd\\e ")
        XCTAssertEqual(try group.string("Empty"), "")
        XCTAssertNil(try group.string("Missing"))
    }

    func testUnknownEscapesAndATrailingBackslashAreRefusedWithTheirLine() throws {
        for value in ["a\\xb", "a\\", "a\\;b"] {
            let group = try XCTUnwrap(try parse("[A]\n\nK=\(value)\n").group("A"))
            XCTAssertThrowsError(try group.string("K"), value) { error in
                XCTAssertEqual(error as? KeyFileError, KeyFileError(line: 3, .badEscape(key: "K")), value)
            }
        }
        let group = try XCTUnwrap(try parse("[A]\nK=a;b\\q\n").group("A"))
        XCTAssertThrowsError(try group.list("K"))
    }

    func testLists() throws {
        let cases: [(String, [String])] = [
            ("", []),
            ("a", ["a"]),
            ("a;", ["a"]),
            ("a;b", ["a", "b"]),
            ("a;b;", ["a", "b"]),
            ("a\\;b;c", ["a;b", "c"]),
            ("a;;b", ["a", "", "b"]),
            (";", [""]),
            ("a\\sb;\\\\", ["a b", "\\"]),
        ]
        for (value, expected) in cases {
            let group = try XCTUnwrap(try parse("[A]\nK=\(value)\n").group("A"))
            XCTAssertEqual(try group.list("K"), expected, value)
        }
    }

    func testLocalizedKeysAreCheckedThenDropped() throws {
        let group = try XCTUnwrap(
            try parse("[A]\nName=x\nName[de]=y\nName[sr_RS@latin]=z\nName[de_DE.UTF-8]=w\n").group("A"))
        XCTAssertEqual(group.entries, ["Name": "x"])
        XCTAssertEqual(group.keys, ["Name"])
        XCTAssertEqual(refusal("[A]\nName[de=y\n")?.problem, .badKey("Name[de"))
        XCTAssertEqual(refusal("[A]\nName[]=y\n")?.problem, .badKey("Name[]"))
        XCTAssertEqual(refusal("[A]\nName[d e]=y\n")?.problem, .badKey("Name[d e]"))
        XCTAssertEqual(
            refusal("[A]\nName[de]=y\nName[de]=z\n"), KeyFileError(line: 3, .duplicateKey("Name[de]", group: "A")))
    }

    func testStructuralMistakesAreRefusedWithTheirLine() {
        let cases: [(String, KeyFileError)] = [
            ("K=v\n[A]\n", KeyFileError(line: 1, .entryBeforeGroup)),
            ("[A]\nK=1\nK=2\n", KeyFileError(line: 3, .duplicateKey("K", group: "A"))),
            ("[A]\n[B]\n[A]\n", KeyFileError(line: 3, .duplicateGroup("A"))),
            ("[A]\njust words\n", KeyFileError(line: 2, .notAnEntry)),
            ("[A\n", KeyFileError(line: 1, .badGroupHeader)),
            ("[]\n", KeyFileError(line: 1, .badGroupHeader)),
            ("[A]x\n", KeyFileError(line: 1, .badGroupHeader)),
            ("[A]]\n", KeyFileError(line: 1, .badGroupHeader)),
            ("[A[B]\n", KeyFileError(line: 1, .badGroupHeader)),
            ("[Gruppé]\n", KeyFileError(line: 1, .badGroupHeader)),
            ("[A]\n=v\n", KeyFileError(line: 2, .badKey(""))),
            ("[A]\nKey_1=v\n", KeyFileError(line: 2, .badKey("Key_1"))),
            ("[A]\nK K=v\n", KeyFileError(line: 2, .badKey("K K"))),
            ("[A]\nK=v\r\n", KeyFileError(line: 2, .controlCharacter(13))),
            ("[A]\nK=a\tb\n", KeyFileError(line: 2, .controlCharacter(9))),
            ("[A]\n# \u{1B}[2J\n", KeyFileError(line: 2, .controlCharacter(0x1B))),
            ("[A]\nK=a\u{0}b\n", KeyFileError(line: 2, .controlCharacter(0))),
            ("\u{FEFF}[A]\n", KeyFileError(line: 1, .byteOrderMark)),
        ]
        for (text, expected) in cases {
            XCTAssertEqual(refusal(text), expected, text.debugDescription)
        }
    }

    func testBytesThatAreNotUTF8AreRefusedWithTheirLine() {
        XCTAssertEqual(refusal(Array("[A]\nK=".utf8) + [0xFF, 0x0A]), KeyFileError(line: 2, .notUTF8))
        XCTAssertEqual(refusal(Array("[A]\n\nK=".utf8) + [0xC3]), KeyFileError(line: 3, .notUTF8))
    }

    func testCaps() {
        let big = "[A]\n" + String(repeating: "# padding\n", count: KeyFile.Limits.fileBytes / 10 + 1)
        XCTAssertEqual(refusal(big)?.problem, .tooLarge(bytes: big.utf8.count, limit: KeyFile.Limits.fileBytes))
        XCTAssertNoThrow(try parse(String(big.utf8.prefix(KeyFile.Limits.fileBytes))!))

        let longLine = "[A]\nK=" + String(repeating: "x", count: KeyFile.Limits.lineBytes) + "\n"
        XCTAssertEqual(refusal(longLine), KeyFileError(line: 2, .lineTooLong(limit: KeyFile.Limits.lineBytes)))
        let longestLine = "[A]\nK=" + String(repeating: "x", count: KeyFile.Limits.lineBytes - 2) + "\n"
        XCTAssertNoThrow(try parse(longestLine))

        let groups = (0...KeyFile.Limits.groups).map { "[G\($0)]\n" }.joined()
        XCTAssertEqual(refusal(groups)?.problem, .tooManyGroups(limit: KeyFile.Limits.groups))
        XCTAssertNoThrow(try parse((1...KeyFile.Limits.groups).map { "[G\($0)]\n" }.joined()))

        let entries = "[A]\n" + (0...KeyFile.Limits.entriesPerGroup).map { "K\($0)=v\n" }.joined()
        XCTAssertEqual(refusal(entries)?.problem, .tooManyEntries(group: "A", limit: KeyFile.Limits.entriesPerGroup))
        let localized = "[A]\n" + (0...KeyFile.Limits.entriesPerGroup).map { "K[l\($0)]=v\n" }.joined()
        XCTAssertEqual(
            refusal(localized)?.problem, .tooManyEntries(group: "A", limit: KeyFile.Limits.entriesPerGroup),
            "localized entries count against the cap although they are dropped")
    }

    func testMessagesNameTheLineAndTheProblem() {
        XCTAssertEqual(
            KeyFileError(line: 2, .controlCharacter(13)).description,
            "line 2: a carriage return (the file must have Unix line ends)")
        XCTAssertEqual(KeyFileError(line: 4, .controlCharacter(9)).description, "line 4: a control character (U+0009)")
        XCTAssertEqual(KeyFileError(line: nil, .notUTF8).description, "not valid UTF-8")
    }
}
