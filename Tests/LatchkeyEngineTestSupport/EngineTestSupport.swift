import Foundation
import LatchkeyCrypto
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets

// Helpers shared by the tests that drive the engine directly: the engine's own (LatchkeyEngineTests)
// and the Secret Service's without D-Bus (LatchkeySecretServiceUnitTests).

/// Cheap Argon2id parameters so that tests create keychains in milliseconds (allowWeak only).
package let testParameters = Argon2Parameters(timeCost: 1, memoryKiB: 8192, parallelism: 1)
package let testCaller = Caller(uid: getuid(), pid: getpid(), mayUseAnyGroup: true)

package func secret(_ text: String) -> SecretBytes { SecretBytes(copying: Array(text.utf8)) }

/// A fresh keychain in a temporary directory, created with password "pw" and unlocked.
package func makeKeychain(
    policy: any AccessPolicy = AccessGroupPolicy(), file: StaticString = #filePath,
    line: UInt = #line
) throws -> (Keychain, String) {
    let directory = NSTemporaryDirectory() + "latchkey-engine-test-\(UUID().uuidString)"
    let keychain = Keychain(location: KeychainLocation(directory: directory), policy: policy)
    try keychain.create(password: secret("pw"), parameters: testParameters, allowWeakParameters: true)
    return (keychain, directory)
}

/// Runs a SecItem-style call and returns its status (0 on success), like the C API does.
package func status(_ body: () throws -> Void) -> Int32 {
    do {
        try body()
        return 0
    } catch let error as SecError {
        return error.status
    } catch {
        return SecStatus.internalComponent
    }
}

extension Keychain {
    package func add(_ d: SecDictionary) throws(SecError) -> SecValue? { try add(d, caller: testCaller) }
    package func copy(_ d: SecDictionary) throws(SecError) -> SecValue? { try copyMatching(d, caller: testCaller) }
    package func update(_ q: SecDictionary, _ a: SecDictionary) throws(SecError) {
        try update(q, a, caller: testCaller)
    }
    package func delete(_ d: SecDictionary) throws(SecError) { try delete(d, caller: testCaller) }
}

package func genp(_ service: String, _ account: String, _ extra: SecDictionary = [:]) -> SecDictionary {
    var d: SecDictionary = ["class": .string("genp"), "svce": .string(service), "acct": .string(account)]
    for (k, v) in extra { d[k] = v }
    return d
}

package func bytes(_ text: String) -> SecValue { .data(Array(text.utf8)) }

/// A policy that records what it is asked, and refuses everything while `deny` is set.
package final class RecordingPolicy: AccessPolicy, @unchecked Sendable {
    private let lock = NSLock()
    private var requests: [AccessRequest] = []
    private var refusal: SecError?
    package let defaultGroup: String

    package init(defaultGroup: String) {
        self.defaultGroup = defaultGroup
    }

    package var deny: SecError? {
        get { lock.withLock { refusal } }
        set { lock.withLock { refusal = newValue } }
    }

    /// The requests asked about since the last call.
    package func take() -> [AccessRequest] {
        lock.withLock {
            defer { requests = [] }
            return requests
        }
    }

    package func defaultAccessGroup(for caller: Caller) -> String { defaultGroup }

    package func decide(_ request: AccessRequest) -> AccessDecision {
        lock.withLock {
            requests.append(request)
            return refusal.map { .deny($0) } ?? .allow
        }
    }
}
