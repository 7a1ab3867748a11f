import Foundation
import LatchkeyCrypto
import LatchkeyEngineTestSupport
import LatchkeyModel
import LatchkeySecrets
import XCTest

@testable import LatchkeyEngine

/// The Argon2id derivations of the engine (issue 10, defect 3): a keybag whose cost is beyond the limits
/// pam_latchkey applies is refused before anything is derived, and at most one derivation runs at a time,
/// so retries of a client that gave up cannot pile up threads that each spin for as long as the file says.
final class DerivationTests: XCTestCase {
    /// Rewrites the keybag in `directory` with these Argon2id costs and a recomputed checksum, as a buggy
    /// or hostile writer could (docs/KEYBAG.md: t at 28, m at 32, p at 36, SHA-256 of bytes 0-547 at 548).
    static func rewriteCosts(in directory: String, t: UInt32, m: UInt32, p: UInt32) throws {
        let path = directory + "/keybag"
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        for (offset, value) in [(28, t), (32, m), (36, p)] {
            for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: value >> (24 - 8 * i)) }
        }
        bytes.replaceSubrange(548..<580, with: SHA256.hash(Array(bytes[0..<548])))
        try Data(bytes).write(to: URL(fileURLWithPath: path))
    }

    /// Runs `body` (a status) on its own thread and waits for it at most `seconds`; nil if it has not finished
    /// then (it is left running: an Argon2id run cannot be stopped).
    static func finished(within seconds: Double, _ body: @escaping @Sendable () -> Int32) -> Int32? {
        final class Box: @unchecked Sendable { var value: Int32? }
        let box = Box(), done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            box.value = body()
            done.signal()
        }
        return done.wait(timeout: .now() + seconds) == .success ? box.value : nil
    }

    func testAKeybagBeyondTheLimitsIsRefusedNamingTheFile() throws {
        for (t, m, p) in [(UInt32.max, UInt32(8192), UInt32(1)), (1, 4 * 1024 * 1024, 1), (1, 8192, 16)] {
            let (created, directory) = try makeKeychain()
            let location = KeychainLocation(directory: directory)
            _ = try created.add(genp("s", "a", ["pdmn": .string("dk")]))
            try Self.rewriteCosts(in: directory, t: t, m: m, p: p)
            let bytes = try Data(contentsOf: URL(fileURLWithPath: location.keybagPath))

            let keychain = Keychain(location: location)
            let problem = keychain.status().problem ?? "no problem reported"
            XCTAssertTrue(problem.contains(location.keybagPath), problem)
            XCTAssertTrue(problem.contains("refused") && problem.contains("t=\(t)"), problem)
            // Refused before any derivation: the answer comes at once, whatever the file asks for. (The
            // deadline only bounds the wait: unfixed, t = 2^32 - 1 spins for years.)
            let unlock = Self.finished(within: 20) { status { try keychain.unlock(password: secret("pw")) } }
            XCTAssertEqual(unlock, SecStatus.invalidKeychain, "t=\(t) m=\(m) p=\(p)")
            XCTAssertEqual(
                status { _ = try keychain.copy(genp("s", "a")) }, SecStatus.invalidKeychain, "nothing is served")
            XCTAssertEqual(
                Self.finished(within: 20) {
                    status { try keychain.changePassword(old: secret("pw"), new: secret("x")) }
                },
                SecStatus.invalidKeychain)
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: location.keybagPath)), bytes, "left untouched")
        }
    }

    /// Three unlocks at once on a keybag whose derivation takes a good while: one derives, the others are
    /// refused as busy at once instead of each starting a derivation of their own.
    func testOneDerivationAtATime() throws {
        let (keychain, directory) = try makeKeychain()
        keychain.lock(all: true)
        // Within the limits and costly enough (about 2 s here) that the three calls, released together, overlap.
        try Self.rewriteCosts(in: directory, t: 8, m: 262_144, p: 1)
        let reopened = Keychain(location: KeychainLocation(directory: directory))
        let start = DispatchGroup(), finished = DispatchGroup()
        start.enter()
        final class Results: @unchecked Sendable {
            let lock = NSLock()
            var statuses: [Int32] = []
        }
        let results = Results()
        for _ in 0..<3 {
            finished.enter()
            Thread.detachNewThread {
                start.wait()
                // A wrong password: the derivation is all this call does, so it cannot change the keybag.
                let result = status { try reopened.unlock(password: secret("wrong")) }
                results.lock.withLock { results.statuses.append(result) }
                finished.leave()
            }
        }
        start.leave()
        XCTAssertEqual(finished.wait(timeout: .now() + 120), .success)
        let statuses = results.lock.withLock { results.statuses }
        XCTAssertTrue(statuses.contains(SecStatus.authFailed), "\(statuses)")
        XCTAssertTrue(statuses.contains(SecStatus.badReq), "no call was refused as busy: \(statuses)")
        XCTAssertEqual(statuses.filter { $0 != SecStatus.authFailed && $0 != SecStatus.badReq }, [])
        // Once it is done, the next one derives.
        XCTAssertEqual(status { try reopened.unlock(password: secret("wrong")) }, SecStatus.authFailed)
    }
}
