import LatchkeyCodec
import LatchkeyCrypto
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets

/// The backup reader (docs/BACKUP.md §4–5) on bytes from a fuzzer, as `latchkey restore` hands them to the
/// agent: the container (header, Argon2id limits, chunk lengths and authentication) and the items inside.
/// A fuzzer cannot forge an AES-GCM tag, so the first byte chooses how far in the input goes:
///
/// - 0: the input is a whole file, opened with the target's fixed key (the header and the framing);
/// - otherwise: the input is the plaintext of the file's one chunk, sealed with the fixed key, so the
///   record decoder behind the authentication sees it.
///
/// Checks, beyond "does not trap": a refusal is errSecDecode, or errSecAuthFailed for a header whose
/// verifier does not match; nothing else. No Argon2id runs (the key is given), so an input cannot make
/// the target slow.
package enum BackupTarget {
    /// The target's backup key.
    static let key = SecretBytes(copying: [UInt8](repeating: 0x42, count: 32))
    static let header = BackupHeader(
        parameters: Argon2Parameters(timeCost: 1, memoryKiB: 8192, parallelism: 1),
        salt: [UInt8](repeating: 7, count: 16))

    package static func run(_ input: [UInt8]) -> FuzzOutcome {
        var outcome = FuzzOutcome()
        guard let mode = input.first else { return outcome }
        let file: [UInt8]
        if mode == 0 {
            file = Array(input.dropFirst())
        } else {
            guard var writer = try? BackupFile.Writer(header: header, key: key),
                (try? writer.append(Array(input.dropFirst()), final: true)) != nil
            else {
                outcome.problems.append("a chunk within the caps could not be sealed")
                return outcome
            }
            file = writer.bytes
        }
        outcome.frames += 1
        do throws(SecError) {
            let found = try Keychain.inspectBackup(file, key: key)
            outcome.requests += 1
            outcome.parsed += found.items
        } catch {
            if error.status != SecStatus.decode && error.status != SecStatus.authFailed {
                outcome.problems.append("refused with an unexpected status \(error.status)")
            }
        }
        return outcome
    }

    /// Seeds: a header alone, a header and a chunk that fails, and chunks holding items (a generic password,
    /// the Secret Service's state and an internet password) to mutate from.
    package static var seeds: [(name: String, bytes: [UInt8])] {
        let start = (try? BackupFile.Writer(header: header, key: key).bytes) ?? []
        let genp: SecValue = .dictionary([
            "class": .string("genp"), "pdmn": .string("ak"), "sync": .bool(false), "data": .data(Array("hunter2".utf8)),
            "attrs": .dictionary([
                "svce": .string("mail"), "acct": .string("alice"), "agrp": .string("default"), "pdmn": .string("ak"),
                "sync": .int(0), "labl": .string("Mail"),
            ]),
            "ss": .dictionary([
                "a": .array([.string("service"), .string("mail")]), "c": .string("login"), "t": .string("text/plain"),
            ]),
        ])
        let inet: SecValue = .dictionary([
            "class": .string("inet"), "pdmn": .string("ck"), "sync": .bool(false), "data": .data([0, 1, 2]),
            "attrs": .dictionary([
                "srvr": .string("example.com"), "acct": .string("bob"), "agrp": .string("browser"),
                "pdmn": .string("ck"), "sync": .int(0), "port": .int(443),
            ]),
        ])
        let state: SecValue = .dictionary([
            "state": .dictionary([
                "collections": .array([
                    .dictionary([
                        "id": .string("work"), "label": .string("Work"), "created": .int(1), "modified": .int(2),
                    ])
                ]),
                "aliases": .dictionary(["default": .string("work")]),
            ])
        ])
        return [
            ("file-header-only", [0] + start),
            ("file-one-damaged-chunk", [0] + start + [0, 0, 0, 40] + [UInt8](repeating: 0, count: 40)),
            ("chunk-genp", [1] + ValueCodec.encode(.array([genp]))),
            ("chunk-state-inet", [1] + ValueCodec.encode(.array([state, inet, genp]))),
        ]
    }
}
