import Foundation
import LatchkeySystem
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

final class EnvironmentTests: XCTestCase {
    private let variable = "LATCHKEY_SYSTEM_TEST_VARIABLE"

    override func tearDown() {
        unsetenv(variable)
    }

    func testValueTreatsEmptyAsUnset() {
        unsetenv(variable)
        XCTAssertNil(Environment.value(variable))
        setenv(variable, "", 1)
        XCTAssertNil(Environment.value(variable))
        setenv(variable, "a=b c", 1)
        XCTAssertEqual(Environment.value(variable), "a=b c")
    }

    func testEntriesListEveryVariable() {
        setenv(variable, "present", 1)
        let entries = Environment.entries()
        XCTAssertTrue(entries.contains("\(variable)=present"))
        XCTAssertEqual(entries.filter { $0.hasPrefix(variable + "=") }.count, 1)
        unsetenv(variable)
        XCTAssertFalse(Environment.entries().contains { $0.hasPrefix(variable + "=") })
    }

    /// pam/peer.c keeps the same list in C (the PAM module refuses an agent started with one): the two
    /// must not drift apart, and the token modules' variables are on both.
    func testCodeVariablesMatchThePAMModule() throws {
        let peer = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("pam/peer.c")
        let source = try String(contentsOf: peer, encoding: .utf8)
        let entries = source.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("\t{ \""), let end = line.dropFirst(4).firstIndex(of: "\"") else { return nil }
            return String(line[line.index(line.startIndex, offsetBy: 4)..<end])
        }
        XCTAssertEqual(entries, Environment.codeVariables)
        for name in ["OPENSC_CONF=", "OPENSC_DRIVER=", "PCSCLITE_CSOCK_NAME=", "P11_KIT_SERVER_ADDRESS="] {
            XCTAssertTrue(Environment.codeVariables.contains(name), name)
        }
    }
}
