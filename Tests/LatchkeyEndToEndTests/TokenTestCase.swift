import Foundation
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// What the token tests share (docs/TOKENS.md): real SoftHSM2 tokens in a temporary directory
/// (`SOFTHSM2_CONF`), loaded with an EC and an RSA key pair and their certificates by pkcs11-tool and
/// openssl; a tokens.conf that names SoftHSM's module alone (`LATCHKEY_TOKENS_CONF`, honoured because the
/// tests' agent runs as root); and the access-control tests' stand-in pinentry, which answers the PIN.
class TokenTestCase: AccessControlTestCase {
    static let module = "/usr/lib/softhsm/libsofthsm2.so"
    static let pin = "1234"
    var tokens = ""

    override func setUpWithError() throws {
        try XCTSkipUnless(geteuid() == 0, "LATCHKEY_TOKENS_CONF is honoured by an agent running as root only")
        try XCTSkipUnless(FileManager.default.fileExists(atPath: Self.module), "softhsm2 is not installed")
        // Before the agent starts (the keychain is created in super's set-up).
        tokens = NSTemporaryDirectory() + "lk-tokens-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: tokens + "/store", withIntermediateDirectories: true)
        try "directories.tokendir = \(tokens)/store\nobjectstore.backend = file\nlog.level = ERROR\n"
            .write(toFile: tokens + "/softhsm2.conf", atomically: true, encoding: .utf8)
        try tokensConfiguration().write(toFile: tokens + "/tokens.conf", atomically: true, encoding: .utf8)
        setenv("SOFTHSM2_CONF", tokens + "/softhsm2.conf", 1)
        setenv("LATCHKEY_TOKENS_CONF", tokens + "/tokens.conf", 1)
        try super.setUpWithError()
    }

    /// The tokens.conf the agent reads (written before it starts): SoftHSM alone, started again at each look.
    func tokensConfiguration() throws -> String {
        "# tests: SoftHSM alone\nsystem-modules = no\nmodule = \(Self.module)\nrestart = softhsm2\n"
    }

    override func tearDown() {
        super.tearDown()
        unsetenv("SOFTHSM2_CONF")
        unsetenv("LATCHKEY_TOKENS_CONF")
        if !tokens.isEmpty { try? FileManager.default.removeItem(atPath: tokens) }
    }

    /// Runs a tool and fails the test when it does not succeed.
    @discardableResult
    func tool(_ path: String, _ arguments: [String], input: String? = nil) throws -> String {
        let output = try TestProcess.run(path, arguments, input: input)
        guard output.status == 0 else {
            throw NSError(
                domain: "tool", code: Int(output.status),
                userInfo: [NSLocalizedDescriptionKey: "\(path) \(arguments.joined(separator: " ")): \(output.err)"])
        }
        return output.out
    }

    /// Makes a token labelled `label` with an EC P-256 key pair (CKA_ID 01) and an RSA-2048 one (02), each
    /// with a self-signed certificate (CN label-ec, label-rsa); returns its serial.
    @discardableResult
    func makeToken(_ label: String) throws -> String {
        try tool(
            "/usr/bin/softhsm2-util",
            ["--init-token", "--free", "--label", label, "--so-pin", "12345678", "--pin", Self.pin])
        for (kind, id, parameters) in [
            ("ec", "01", ["-pkeyopt", "ec_paramgen_curve:prime256v1"]),
            ("rsa", "02", ["-pkeyopt", "rsa_keygen_bits:2048"]),
        ] {
            let base = "\(tokens)/\(label)-\(kind)"
            try tool(
                "/usr/bin/openssl",
                ["req", "-x509", "-newkey", kind] + parameters + [
                    "-nodes", "-keyout", base + ".key", "-out", base + ".crt", "-subj", "/CN=\(label)-\(kind)", "-days",
                    "30",
                ])
            try tool("/usr/bin/openssl", ["pkey", "-in", base + ".key", "-pubout", "-out", base + ".pub"])
            for (file, type) in [(".key", "privkey"), (".pub", "pubkey"), (".crt", "cert")] {
                try tool(
                    "/usr/bin/pkcs11-tool",
                    [
                        "--module", Self.module, "--token-label", label, "--login", "--pin", Self.pin, "--write-object",
                        base + file, "--type", type, "--id", id, "--label", "\(label)-\(kind)",
                    ])
            }
            // The private key leaves this test's files once it is on the token.
            try FileManager.default.removeItem(atPath: base + ".key")
        }
        return try serial(of: label)
    }

    func serial(of label: String) throws -> String {
        let slots = try tool("/usr/bin/softhsm2-util", ["--show-slots"])
        var serial = ""
        for line in slots.split(separator: "\n") {
            let text = line.trimmingCharacters(in: .whitespaces)
            if text.hasPrefix("Serial number:") {
                serial = text.dropFirst("Serial number:".count).trimmingCharacters(in: .whitespaces)
            }
            if text.hasPrefix("Label:"), text.dropFirst("Label:".count).trimmingCharacters(in: .whitespaces) == label {
                return serial
            }
        }
        throw NSError(domain: "softhsm", code: 1, userInfo: [NSLocalizedDescriptionKey: "no token \(label)"])
    }

    func deleteToken(_ label: String) throws {
        try tool("/usr/bin/softhsm2-util", ["--delete-token", "--token", label])
    }

    /// The token items the agent shows now, as attribute dictionaries (with their persistent references).
    func tokenItems(_ itemClass: CFString, _ extra: [CFString: Any] = [:]) -> [[String: Any]] {
        var query: [CFString: Any] = [
            kSecClass: itemClass, kSecAttrAccessGroup: kSecAttrAccessGroupToken, kSecMatchLimit: kSecMatchLimitAll,
            kSecReturnAttributes: true, kSecReturnPersistentRef: true,
        ]
        for (key, value) in extra { query[key] = value }
        var result: CFTypeRef?
        guard SecItemCopyMatching(query as CFDictionary, &result) == errSecSuccess else { return [] }
        return (result as? [[String: Any]]) ?? []
    }

    /// Waits (at most 10 s: the watcher looks every second) until `condition` holds.
    func waitFor(_ what: String, _ condition: () -> Bool) {
        let deadline = Date().addingTimeInterval(10)
        while !condition() {
            if Date() > deadline {
                XCTFail("timed out waiting for \(what)")
                return
            }
            usleep(100_000)
        }
    }

    /// Waits until the agent shows the items of `tokens` tokens made by `makeToken`: four keys and two
    /// certificates each.
    func waitForItems(tokens: Int) {
        waitFor("the items of \(tokens) token(s)") {
            tokenItems(kSecClassKey).count == 4 * tokens && tokenItems(kSecClassCertificate).count == 2 * tokens
        }
    }

    /// The private key of the identity whose certificate is `commonName`, read through kSecClassIdentity.
    func identityKey(_ commonName: String, file: StaticString = #filePath, line: UInt = #line) -> SecKey? {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(
            [
                kSecClass: kSecClassIdentity, kSecAttrLabel: commonName, kSecReturnRef: true,
            ] as CFDictionary, &result)
        XCTAssertEqual(status, errSecSuccess, "identity \(commonName)", file: file, line: line)
        guard let result else { return nil }
        var key: SecKey?
        XCTAssertEqual(SecIdentityCopyPrivateKey(result as! SecIdentity, &key), errSecSuccess, file: file, line: line)
        return key
    }

    /// Checks `signature` of `message` with the openssl tool against the certificate of the test's `base`.
    func verifyWithOpenSSL(
        _ signature: Data, of message: Data, base: String, options: [String] = [], file: StaticString = #filePath,
        line: UInt = #line
    ) throws {
        let directory = tokens + "/verify-\(UUID().uuidString.prefix(6))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try message.write(to: URL(fileURLWithPath: directory + "/message"))
        try signature.write(to: URL(fileURLWithPath: directory + "/signature"))
        let output = try TestProcess.run(
            "/usr/bin/openssl",
            ["dgst", "-sha256"] + options + [
                "-verify", "\(tokens)/\(base).pub", "-signature", directory + "/signature", directory + "/message",
            ])
        XCTAssertEqual(output.status, 0, "openssl: \(output.out) \(output.err)", file: file, line: line)
        XCTAssertTrue(output.out.contains("Verified OK"), output.out, file: file, line: line)
    }

    /// How many prompts the stand-in pinentry showed so far.
    func promptsShown() -> Int {
        ((try? String(contentsOfFile: shown, encoding: .utf8)) ?? "").components(separatedBy: "SETDESC").count - 1
    }
}
