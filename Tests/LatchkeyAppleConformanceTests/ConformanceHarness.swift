import Foundation
import LatchkeyCrypto
import LatchkeySecrets
import LatchkeyTestSupport
import XCTest

@testable import Latchkey

/// Runs each ported Apple test against a fresh agent in temporary XDG directories, with a keychain
/// created and unlocked (the state Apple's tests start from): the library starts the real `latchkeyd` on
/// demand, exactly as it does for users and as LatchkeyEndToEndTests' `AgentTestCase` does.
class ConformanceTestCase: XCTestCase {
    var runtimeDirectory = ""

    override func setUpWithError() throws {
        let base = NSTemporaryDirectory() + "lk-apple-\(UUID().uuidString.prefix(8))"
        runtimeDirectory = base + "/run"
        try FileManager.default.createDirectory(
            atPath: runtimeDirectory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        setenv("XDG_RUNTIME_DIR", runtimeDirectory, 1)
        setenv("XDG_DATA_HOME", base + "/data", 1)
        setenv("LATCHKEYD", TestProcess.binDirectory + "/latchkeyd", 1)
        AgentClient.shared.resetConnection()
        // Cheap Argon2id parameters (tests only), password "pw".
        try KeychainControl.create(
            password: SecretBytes(copying: Array("pw".utf8)),
            options: .init(timeCost: 1, memoryKiB: 8192, parallelism: 1, allowWeak: true))
    }

    override func tearDown() {
        let response = AgentClient.shared.send(.hello)
        if case .dictionary(let d)? = response.value, case .int(let pid)? = d["pid"] {
            kill(pid_t(pid), SIGTERM)
            TestProcess.waitForExit(pid_t(pid))
        }
        AgentClient.shared.resetConnection()
    }

    /// The test's entitlements: Apple's tests run with `keychain-access-groups` naming the groups they
    /// use. On latchkey an application file grants an application its groups (docs/APPLICATIONS.md); the
    /// test process, an unlisted program, stands in for such an application by giving the keychain
    /// password for those groups on its connection (`authorizeGroups`), as `latchkey --access-group` does.
    func entitle(_ groups: [String]) throws {
        try KeychainControl.authorizeAccessGroups(groups, password: SecretBytes(copying: Array("pw".utf8)))
    }

    // MARK: Test data

    /// A file of Tests/LatchkeyAppleConformanceTests/Resources (a `.hex` file is decoded).
    func resource(_ path: String) throws -> Data {
        let url = try XCTUnwrap(Bundle.module.url(forResource: "Resources/" + path, withExtension: nil), path)
        let data = try Data(contentsOf: url)
        guard path.hasSuffix(".hex") else { return data }
        let text = String(decoding: data, as: UTF8.self).filter { !$0.isWhitespace }
        var bytes: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            bytes.append(try XCTUnwrap(UInt8(text[index..<next], radix: 16)))
            index = next
        }
        return Data(bytes)
    }

    func certificate(_ path: String) throws -> SecCertificate {
        try XCTUnwrap(SecCertificateCreateWithData(nil, try resource(path) as CFData), path)
    }

    // MARK: SecItem calls

    /// SecItemCopyMatching's status and result.
    func copy(_ query: [CFString: Any]) -> (status: OSStatus, result: CFTypeRef?) {
        var result: CFTypeRef?
        let status = SecItemCopyMatching(query as NSDictionary, &result)
        return (status, result)
    }

    /// SecItemAdd's status and result.
    func add(_ attributes: [CFString: Any]) -> (status: OSStatus, result: CFTypeRef?) {
        var result: CFTypeRef?
        let status = SecItemAdd(attributes as NSDictionary, &result)
        return (status, result)
    }

    func update(_ query: [CFString: Any], _ changes: [CFString: Any]) -> OSStatus {
        SecItemUpdate(query as NSDictionary, changes as NSDictionary)
    }

    func delete(_ query: [CFString: Any]) -> OSStatus {
        SecItemDelete(query as NSDictionary)
    }

    /// A result dictionary with String keys.
    func dictionary(_ result: CFTypeRef?, file: StaticString = #filePath, line: UInt = #line) throws -> [String: Any] {
        try XCTUnwrap(
            result as? [String: Any], "not a dictionary: \(String(describing: result))", file: file, line: line)
    }

    // MARK: SecKey calls

    /// The code of a SecKey function's CFError (consumed), or nil.
    func code(_ error: inout Unmanaged<CFError>?) -> Int? {
        defer { error = nil }
        return error?.takeRetainedValue().code
    }

    /// SecKeyCreateRandomKey, throwing its error; the private key and its public key (Apple's
    /// SecKeyGeneratePair, which the ported tests used, gives the two).
    func generatePair(_ type: CFString, _ bits: Int, _ extra: [CFString: Any] = [:]) throws -> (
        privateKey: SecKey, publicKey: SecKey
    ) {
        var parameters: [CFString: Any] = [kSecAttrKeyType: type, kSecAttrKeySizeInBits: bits]
        for (name, value) in extra { parameters[name] = value }
        var error: Unmanaged<CFError>?
        guard let key = SecKeyCreateRandomKey(parameters as NSDictionary, &error) else {
            throw error!.takeRetainedValue() as Error
        }
        return (key, try XCTUnwrap(SecKeyCopyPublicKey(key)))
    }

    /// A digest, for the "Digest" algorithms (OpenSSL through LatchkeyCrypto: the test's own tool, not
    /// the API under test).
    func digest(_ algorithm: DigestAlgorithm, _ data: Data) throws -> Data {
        Data(try algorithm.hash(Array(data)))
    }
}
