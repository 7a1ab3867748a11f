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
}
