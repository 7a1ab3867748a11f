import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto

/// PKCS#12 files that ask for more key-derivation work than accepted are refused before any derivation.
/// The files here ask for 2^31−1 iterations: before the cap, opening one ran for minutes (245 s measured
/// for the MAC alone) before failing, far beyond any CI run's patience, so a regression hangs this test.
final class PKCS12WorkTests: XCTestCase {
    /// `0x00800000` as a DER INTEGER: the smallest count OpenSSL writes in four content bytes, so that
    /// patching it to 0x7fffffff keeps every length in the file.
    private static let exported: [UInt8] = [0x02, 0x04, 0x00, 0x80, 0x00, 0x00]

    func testHugeIterationCountsAreRefusedWithoutDeriving() throws {
        let workspace = try OpenSSLWorkspace()
        try workspace.run([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", "key.pem",
            "-out", "cert.pem", "-subj", "/CN=Work", "-days", "2",
        ])
        // -iter sets the MAC's, the certificates' PBKDF2 and the key's PBKDF2 counts alike.
        try workspace.run([
            "pkcs12", "-export", "-in", "cert.pem", "-inkey", "key.pem", "-iter", "8388608", "-passout", "pass:work",
            "-out", "work.p12",
        ])
        let file = try workspace.read("work.p12")
        let offsets = (0...(file.count - Self.exported.count)).filter {
            Array(file[$0..<$0 + Self.exported.count]) == Self.exported
        }
        // The encrypted certificate safe, the shrouded key and the MAC (last).
        XCTAssertEqual(offsets.count, 3, "\(offsets)")
        for offset in offsets {
            var patched = file
            patched.replaceSubrange(offset + 2..<offset + 6, with: [0x7f, 0xff, 0xff, 0xff])
            for guess in ["work", "wrong", ""] {
                XCTAssertThrowsError(try PKCS12.parse(der: patched, password: SecretBytes(copying: Array(guess.utf8))))
                {
                    guard case .unsupported(let why)? = $0 as? CryptoError else { return XCTFail("\($0)") }
                    XCTAssertTrue(why.contains("2147483647") && why.contains("at most 10000000"), why)
                }
            }
        }
        // The unpatched file, 8,388,608 iterations for each of three derivations, is within the caps.
        XCTAssertNotNil(try PKCS12.parse(der: file, password: SecretBytes(copying: Array("work".utf8))).key)
    }
}
