import CP11Kit
import Foundation
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyCrypto
@testable import LatchkeyTokens

/// `PKCS11Module.deriveECDH` against SoftHSM2's module loaded into the test process, where the session's
/// objects can be seen: the shared secret is the software key's, and no derived object is left after a
/// call, whether it succeeded or failed (docs/TOKENS.md, "Operations").
final class PKCS11DeriveTests: XCTestCase {
    static let module = "/usr/lib/softhsm/libsofthsm2.so"
    private var directory = ""
    private var functions: UnsafeMutablePointer<CK_FUNCTION_LIST>?

    override func setUpWithError() throws {
        try XCTSkipUnless(FileManager.default.fileExists(atPath: Self.module), "softhsm2 is not installed")
        directory = NSTemporaryDirectory() + "lk-derive-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory + "/store", withIntermediateDirectories: true)
        try "directories.tokendir = \(directory)/store\nobjectstore.backend = file\nlog.level = ERROR\n"
            .write(toFile: directory + "/softhsm2.conf", atomically: true, encoding: .utf8)
        setenv("SOFTHSM2_CONF", directory + "/softhsm2.conf", 1)
        try run(
            "/usr/bin/softhsm2-util", "--init-token", "--free", "--label", "d", "--so-pin", "12345678", "--pin", "1234")
        try run(
            "/usr/bin/pkcs11-tool", "--module", Self.module, "--token-label", "d", "--login", "--pin", "1234",
            "--keypairgen", "--key-type", "EC:prime256v1", "--id", "01", "--usage-derive")
    }

    override func tearDown() {
        if let functions {
            p11_kit_module_finalize(functions)
            p11_kit_module_release(functions)
        }
        unsetenv("SOFTHSM2_CONF")
        if !directory.isEmpty { try? FileManager.default.removeItem(atPath: directory) }
    }

    private func run(_ path: String, _ arguments: String...) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "\(path) \(arguments)")
    }

    func testTheSecretIsTheSoftwareKeysAndTheDerivedObjectIsAlwaysDestroyed() throws {
        functions = p11_kit_module_load(Self.module, 0)
        let functions = try XCTUnwrap(functions)
        XCTAssertEqual(p11_kit_module_initialize(functions), CKR_OK)
        let module = PKCS11Module(functions: functions, name: "softhsm2")
        let slot = try XCTUnwrap(try module.slotsWithTokens().first)
        let session = try module.openSession(slot)
        defer { module.closeSession(session) }
        XCTAssertEqual(
            Array("1234".utf8).withUnsafeBytes { module.login(session, pin: $0, contextSpecific: false) }, CKR_OK)
        let key = try XCTUnwrap(module.privateKey(session, ckaID: [0x01]))
        let publicObject = try XCTUnwrap(
            try module.objects(session, objectClass: CK_OBJECT_CLASS(CKO_PUBLIC_KEY)).first)
        let point = TokenDER.ecPoint(
            try XCTUnwrap(module.attribute(session, publicObject, CK_ATTRIBUTE_TYPE(CKA_EC_POINT))))
        let tokenPublic = try AsymmetricKey(externalRepresentation: point, algorithm: .ec, isPrivate: false)
        let secretKeys = { try module.objects(session, objectClass: CK_OBJECT_CLASS(CKO_SECRET_KEY)).count }

        let peer = try AsymmetricKey.generateEC(bits: 256)
        let derived = try module.deriveECDH(session, key: key, peerPoint: peer.publicKeyBytes, length: 32).get()
        let expected = try peer.keyExchange(.ecdhKeyExchangeStandard, with: tokenPublic)
        XCTAssertTrue(derived.constantTimeEquals(expected))
        XCTAssertEqual(try secretKeys(), 0, "the derived object is destroyed")

        // A size the key cannot give (48 bytes of a P-256 secret; SoftHSM refuses it in C_DeriveKey, a
        // token that made it anyway would fail the size check, which destroys it): an error, no object left.
        XCTAssertThrowsError(
            try module.deriveECDH(session, key: key, peerPoint: peer.publicKeyBytes, length: 48).get())
        XCTAssertEqual(try secretKeys(), 0)
        // A point of another curve: the token's error, nothing made.
        let other = try AsymmetricKey.generateEC(bits: 384)
        XCTAssertThrowsError(
            try module.deriveECDH(session, key: key, peerPoint: other.publicKeyBytes, length: 32).get())
        XCTAssertEqual(try secretKeys(), 0)
        // More than the largest field is refused before the token is asked.
        if case .failure(let failure) = module.deriveECDH(
            session, key: key, peerPoint: peer.publicKeyBytes, length: PKCS11Module.maximumDerivedSize + 1)
        {
            XCTAssertEqual(failure.rv, CKR_ARGUMENTS_BAD)
        } else {
            XCTFail("a secret larger than any field was derived")
        }
    }
}
