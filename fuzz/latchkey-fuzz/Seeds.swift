import LatchkeyCodec
import LatchkeyModel
import LatchkeySecrets
import LatchkeyWire

/// The seed corpus: valid inputs for each target, from which the fuzzer and the seeded tests mutate.
/// `latchkey-fuzz seed DIR` writes them to `fuzz/corpus`; LatchkeyFuzzTests checks the files there are
/// these bytes, so a change to the protocol shows up as a corpus to regenerate, not as a corpus that
/// silently stopped reaching the decoders.
///
/// Deterministic (no randomness): a seed's name and bytes never change unless its request does.
package enum Seeds {
    /// Seeds of the `frames` target: what a client writes on a connection, one or more whole frames.
    package static var frames: [(name: String, bytes: [UInt8])] {
        var seeds = requests.map { (name: $0.name, bytes: frame($0.request)) }
        // Several requests on one connection, as the library sends them.
        seeds.append(
            (
                "session",
                requests.filter { ["hello", "add-genp", "copy-all", "update-genp", "delete-genp"].contains($0.name) }
                    .flatMap { frame($0.request) }
            ))
        // A request the agent answers with errSecUnimplemented and then reads on.
        seeds.append(("unknown-opcode-then-hello", frame(payload: [Wire.protocolVersion, 0x7f]) + frame(.hello)))
        return seeds
    }

    /// Seeds of the `dictionaries` target: the value encoding of each SecItem dictionary above.
    package static var dictionaries: [(name: String, bytes: [UInt8])] {
        requests.compactMap { seed in
            switch seed.request {
            case .add(let d), .copyMatching(let d), .delete(let d), .keyOperation(let d), .generateKey(let d):
                return (seed.name, ValueCodec.encode(.dictionary(d)))
            case .update(let query, _):
                return (seed.name, ValueCodec.encode(.dictionary(query)))
            default:
                return nil
            }
        } + [("update-genp-changes", ValueCodec.encode(.dictionary(changes)))]
    }

    /// One request of each kind, with the keys and values real clients send.
    static var requests: [(name: String, request: Request)] {
        let password = SecretBytes(copying: Array("correct horse".utf8))
        let key32 = SecretBytes(copying: [UInt8](repeating: 0x42, count: Request.handoffKeyLength))
        let token = [UInt8](repeating: 0x17, count: Request.sessionTokenLength)
        return [
            ("hello", .hello),
            ("status", .status),
            ("lock", .lock(all: false)),
            ("lock-all", .lock(all: true)),
            ("add-genp", .add(genericPassword)),
            ("add-inet", .add(internetPassword)),
            ("add-key", .add(key)),
            ("add-cert-ref", .add(certificateByReference)),
            ("add-nested", .add(nested)),
            ("copy-all", .copyMatching(copyAll)),
            ("copy-persistent-ref", .copyMatching(byPersistentRef)),
            ("copy-identity", .copyMatching(identityQuery)),
            ("update-genp", .update(query: genpQuery, attributes: changes)),
            ("delete-genp", .delete(genpQuery)),
            ("generate-key", .generateKey(generateKey)),
            (
                "import-secret-service-item",
                .importSecretServiceItem([
                    "label": .string("Mail"), "attributes": .array([.string("service"), .string("mail")]),
                    "secret": .data(Array("pw".utf8)), "contentType": .string("text/plain"),
                    "collection": .string("Work"), "onConflict": .string("keep"), "dryRun": .bool(true),
                ])
            ),
            ("key-operation", .keyOperation(keyOperation)),
            ("create", .create(password: password, options: ["argon2.t": .int(1), "argon2.m": .int(8192)])),
            ("unlock", .unlock(password: password)),
            ("change-password", .changePassword(old: password, new: SecretBytes(copying: Array("new".utf8)))),
            ("key-handoff", .keyHandoff(masterKey: key32, deviceFactor: key32)),
            ("key-handoff-no-factor", .keyHandoff(masterKey: key32, deviceFactor: nil)),
            ("session-open", .sessionOpen(token: token)),
            ("session-close", .sessionClose(token: token)),
        ]
    }

    static let genpQuery: SecDictionary = [
        "class": .string("genp"), "svce": .string("github"), "acct": .string("alice"),
    ]

    static let genericPassword: SecDictionary = [
        "class": .string("genp"), "svce": .string("github"), "acct": .string("alice"), "labl": .string("GitHub"),
        "v_Data": .data(Array("hunter2".utf8)), "pdmn": .string("ak"), "sync": .bool(false),
        "gena": .data([1, 2, 3]), "r_Attributes": .bool(true), "r_PersistentRef": .bool(true),
    ]

    static let internetPassword: SecDictionary = [
        "class": .string("inet"), "srvr": .string("example.com"), "port": .string("443"), "ptcl": .string("htps"),
        "path": .string("/login"), "sdmn": .string("realm"), "atyp": .string("form"), "acct": .data(Array("bob".utf8)),
        "v_Data": .data(Array("pw".utf8)), "invi": .bool(true), "u_AuthUI": .string("u_AuthUIF"),
    ]

    static let key: SecDictionary = [
        "class": .string("keys"), "kcls": .int(1), "type": .int(73), "bsiz": .int(256),
        "atag": .data(Array("tag".utf8)),
        "v_Data": .data([UInt8](repeating: 7, count: 32)), "sign": .bool(true), "perm": .bool(true),
        "pdmn": .string("cku"),
    ]

    static let certificateByReference: SecDictionary = [
        "v_Ref": .dictionary(["class": .string("cert"), "v_Data": .data([0x30, 0x03, 0x02, 0x01, 0x01])]),
        "labl": .string("Example CA"),
    ]

    /// Containers down to the deepest level a request may carry (the top-level dictionary is level 1).
    static var nested: SecDictionary {
        var value: SecValue = .array([.string("deepest")])
        for level in (2..<Wire.maxValueDepth).reversed() {
            value = level % 2 == 0 ? .dictionary(["d\(level)": value]) : .array([value, .null])
        }
        return ["class": .string("genp"), "svce": .string("nested"), "gena": .data([0]), "f_nested": value]
    }

    static let copyAll: SecDictionary = [
        "class": .string("genp"), "m_Limit": .string("m_LimitAll"), "r_Data": .bool(true),
        "r_Attributes": .bool(true), "r_Ref": .bool(false), "sync": .string("syna"), "u_AuthUI": .string("u_AuthUIS"),
        "m_CaseInsensitive": .bool(true),
    ]

    static let byPersistentRef: SecDictionary = [
        "v_PersistentRef": .data(Array("genp".utf8) + [UInt8](repeating: 0xab, count: 16)), "r_Data": .bool(true),
        "m_Limit": .int(3),
    ]

    static let identityQuery: SecDictionary = [
        "class": .string("idnt"), "labl": .string("alice"), "kcls": .int(1), "r_Ref": .bool(true),
        "m_Limit": .string("m_LimitOne"),
    ]

    static let changes: SecDictionary = [
        "v_Data": .data(Array("hunter3".utf8)), "labl": .string("GitHub (work)"), "pdmn": .string("aku"),
    ]

    static let generateKey: SecDictionary = [
        "type": .int(73), "bsiz": .int(256),
        "private": .dictionary(["perm": .bool(true), "atag": .data(Array("tag".utf8)), "labl": .string("signing")]),
        "public": .dictionary(["perm": .bool(false)]),
    ]

    static let keyOperation: SecDictionary = [
        "v_PersistentRef": .data(Array("keys".utf8) + [UInt8](repeating: 0xcd, count: 16)), "op": .string("sign"),
        "algid": .string("algid:sign:ECDSA:message-X962:SHA256"), "v_Data": .data(Array("message".utf8)),
    ]

    /// One frame: the u32 length, then the payload.
    package static func frame(payload: [UInt8]) -> [UInt8] {
        let n = UInt32(payload.count)
        return [UInt8(n >> 24), UInt8(n >> 16 & 0xff), UInt8(n >> 8 & 0xff), UInt8(n & 0xff)] + payload
    }

    static func frame(_ request: Request) -> [UInt8] { frame(payload: request.encode()) }
}
