import Foundation
import LatchkeyCrypto
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyEngine

/// Cheap Argon2id parameters so that tests create keychains in milliseconds (allowWeak only).
let testParameters = Argon2Parameters(timeCost: 1, memoryKiB: 8192, parallelism: 1)
let testCaller = Caller(uid: getuid(), pid: getpid())

func secret(_ text: String) -> SecretBytes { SecretBytes(copying: Array(text.utf8)) }

/// A fresh keychain in a temporary directory, created with password "pw" and unlocked.
func makeKeychain(
    policy: any AccessPolicy = AccessGroupPolicy(), file: StaticString = #filePath,
    line: UInt = #line
) throws -> (Keychain, String) {
    let directory = NSTemporaryDirectory() + "latchkey-engine-\(UUID().uuidString)"
    let keychain = Keychain(location: KeychainLocation(directory: directory), policy: policy)
    try keychain.create(password: secret("pw"), parameters: testParameters, allowWeakParameters: true)
    return (keychain, directory)
}

/// Runs a SecItem-style call and returns its status (0 on success), like the C API does.
func status(_ body: () throws -> Void) -> Int32 {
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
    func add(_ d: SecDictionary) throws(SecError) -> SecValue? { try add(d, caller: testCaller) }
    func copy(_ d: SecDictionary) throws(SecError) -> SecValue? { try copyMatching(d, caller: testCaller) }
    func update(_ q: SecDictionary, _ a: SecDictionary) throws(SecError) { try update(q, a, caller: testCaller) }
    func delete(_ d: SecDictionary) throws(SecError) { try delete(d, caller: testCaller) }
}

func genp(_ service: String, _ account: String, _ extra: SecDictionary = [:]) -> SecDictionary {
    var d: SecDictionary = ["class": .string("genp"), "svce": .string(service), "acct": .string(account)]
    for (k, v) in extra { d[k] = v }
    return d
}

func bytes(_ text: String) -> SecValue { .data(Array(text.utf8)) }
