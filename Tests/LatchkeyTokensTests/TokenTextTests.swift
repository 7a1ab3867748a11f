import XCTest

@testable import LatchkeyTokens

/// Texts a module gives (token labels, serials, object labels) reach prompts and listings: no control,
/// bidirectional or format character passes, and they are bounded.
final class TokenTextTests: XCTestCase {
    func testControlsBidiAndFormatCharactersAreStrippedAndTextIsBounded() {
        XCTAssertEqual(TokenScan.printable("My card"), "My card")
        XCTAssertEqual(TokenScan.printable("a\u{1B}[2Jb\u{7F}c\u{85}d\u{9B}e"), "a[2Jbcde", "C0, DEL and C1")
        XCTAssertEqual(TokenScan.printable("bank\u{202E}lacol\u{202C}"), "banklacol", "a right-to-left override")
        XCTAssertEqual(
            TokenScan.printable("x\u{2066}y\u{200F}z\u{FEFF}\u{2028}w"), "xyzw", "isolates, marks, separators")
        XCTAssertEqual(TokenScan.printable("Jürgen’s ключ"), "Jürgen’s ключ", "letters of any script stay")
        XCTAssertEqual(TokenScan.printable(String(repeating: "x", count: 100)).count, 64)
        XCTAssertEqual(
            TokenScan.printable(String(repeating: "y", count: 1000), limit: TokenScan.labelLimit).count,
            TokenScan.labelLimit)
    }
}
