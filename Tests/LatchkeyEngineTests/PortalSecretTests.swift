import Foundation
import LatchkeyEngineTestSupport
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyEngine

/// The Secret portal's per-application secrets (docs/PORTAL.md): the documented derivation, bound to
/// the WhenUnlocked class key, put to the access policy, refused while locked.
final class PortalSecretTests: XCTestCase {
    private func application(_ id: String) -> Caller {
        Caller(uid: getuid(), pid: getpid(), accessGroups: [id], mayUseAnyGroup: false)
    }

    private func hex(_ bytes: SecretBytes) -> String {
        bytes.withUnsafeBytes { $0.map { String(format: "%02x", $0) }.joined() }
    }

    /// docs/PORTAL.md's worked example, computed independently (Python's hmac and hashlib, RFC 5869
    /// by hand): class key 00 01 … 1f, info "latchkey portal-secret v1" 00 "org.example.App".
    func testTheDocumentedVector() throws {
        let classKey = SecretBytes(copying: Array(0..<32) as [UInt8])
        XCTAssertEqual(
            hex(try Keychain.portalSecret(classKey: classKey, appID: "org.example.App")),
            "61a1c93ce46cd400f073044ba6fc05849b73a61e2c6ca2010b93af79b07607f2"
                + "3940030fb7a89658bfb66b5354c072b64e82b07a8f5d605ca250550e1882570c")
        XCTAssertEqual(
            hex(try Keychain.portalSecret(classKey: classKey, appID: "org.example.Other")),
            "a4278b4dd253b900ee15059e09c3e1f402fc6030b4b83983f51bde793357464500e9a34567a509fd0829e7096399fd25"
                + "a23e8d7d5202aec574f3f86ab6f6e10c")
        XCTAssertEqual(Keychain.portalSecretLabel, Array("latchkey portal-secret v1".utf8))
    }

    /// The keychain's secret is the derivation of its own WhenUnlocked class key; stable, per id,
    /// unchanged by a lock and unlock and by a password change.
    func testTheSecretIsDerivedFromTheWhenUnlockedKey() throws {
        let (keychain, directory) = try makeKeychain()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try keychain.portalSecret(forApplication: "org.example.App", caller: application("org.example.App"))
        XCTAssertEqual(first.count, 64)
        let classKey = try keychain.lockState.withStore { (_, keys) throws(SecError) in try keys.key(for: .whenUnlocked)
        }
        XCTAssertEqual(hex(first), hex(try Keychain.portalSecret(classKey: classKey, appID: "org.example.App")))
        let other = try keychain.portalSecret(
            forApplication: "org.example.Other", caller: application("org.example.Other"))
        XCTAssertNotEqual(hex(first), hex(other))

        keychain.lock(all: false)
        try keychain.unlock(password: secret("pw"))
        try keychain.changePassword(old: secret("pw"), new: secret("new"), allowWeakParameters: true)
        let again = try keychain.portalSecret(forApplication: "org.example.App", caller: application("org.example.App"))
        XCTAssertEqual(hex(again), hex(first))
    }

    func testRefusedWhileTheWhenUnlockedKeyIsNotHeld() throws {
        let (keychain, directory) = try makeKeychain()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let caller = application("org.example.App")
        keychain.lock(all: false)
        XCTAssertEqual(
            status { _ = try keychain.portalSecret(forApplication: "org.example.App", caller: caller) },
            SecStatus.interactionNotAllowed)
        try keychain.unlock(password: secret("pw"))
        XCTAssertEqual(status { _ = try keychain.portalSecret(forApplication: "org.example.App", caller: caller) }, 0)
    }

    /// Put to the policy as reading the application's own group: a caller without it is refused, and
    /// the request the policy sees names that group.
    func testThePolicyDecides() throws {
        let policy = RecordingPolicy(defaultGroup: "default")
        let (keychain, directory) = try makeKeychain(policy: policy)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        _ = policy.take()
        _ = try keychain.portalSecret(forApplication: "org.example.App", caller: application("org.example.App"))
        let seen = policy.take()
        XCTAssertEqual(seen.map(\.kind), [.readData])
        XCTAssertEqual(seen.first?.accessGroups, ["org.example.App"])
        policy.deny = SecError(SecStatus.missingEntitlement)
        XCTAssertEqual(
            status { _ = try keychain.portalSecret(forApplication: "org.example.App", caller: testCaller) },
            SecStatus.missingEntitlement)

        let (plain, other) = try makeKeychain()
        defer { try? FileManager.default.removeItem(atPath: other) }
        let unlisted = Caller(uid: getuid(), pid: getpid(), accessGroups: ["default"], mayUseAnyGroup: false)
        XCTAssertEqual(
            status { _ = try plain.portalSecret(forApplication: "org.example.App", caller: unlisted) },
            SecStatus.missingEntitlement, "a caller without the application's group")
    }

    func testEmptyOrOverlongIDsAreRefused() throws {
        let (keychain, directory) = try makeKeychain()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for bad in ["", String(repeating: "a", count: 256), "a\u{0}b"] {
            XCTAssertEqual(
                status { _ = try keychain.portalSecret(forApplication: bad, caller: self.application(bad)) },
                SecStatus.param, bad)
        }
    }
}
