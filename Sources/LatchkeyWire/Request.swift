import LatchkeyCodec
import LatchkeyModel
import LatchkeySecrets

/// Request opcodes (docs/PROTOCOL.md, "Requests"). Part of the protocol: never renumber.
/// 0x30–0x3F are the PAM key hand-off, 0x40 and up are reserved for later use.
package enum Opcode: UInt8, Sendable, CaseIterable {
    /// Version and identity check; no body.
    case hello = 0x01
    /// `SecItemAdd`.
    case add = 0x10
    /// `SecItemCopyMatching`.
    case copyMatching = 0x11
    /// `SecItemUpdate`.
    case update = 0x12
    /// `SecItemDelete`.
    case delete = 0x13
    /// An operation with a private key the agent holds (sign, decrypt, key exchange, export).
    case keyOperation = 0x14
    /// `SecKeyCreateRandomKey` for a key that is stored at once (`kSecAttrIsPermanent`).
    case generateKey = 0x15
    /// `LAContext`: make an authentication context of the calling process, or evaluate or update one
    /// (docs/ACCESS-CONTROL.md §7); answers its handle.
    case evaluateContext = 0x16
    /// `LAContext.invalidate()`: the context never serves again.
    case invalidateContext = 0x17
    /// Keychain state; no body.
    case status = 0x20
    /// Create the keychain with a password.
    case create = 0x21
    /// Unlock the password classes.
    case unlock = 0x22
    /// Lock the WhenUnlocked family, or every password class.
    case lock = 0x23
    /// Re-wrap the class keys under a new password.
    case changePassword = 0x24
    /// The keychain password, to use access groups beyond the caller's own on this connection.
    case authorizeGroups = 0x25
    /// The keychain password and a backup key: the agent answers with the whole backup file.
    case backup = 0x26
    /// The keychain password, a backup key and one step of a restore (docs/PROTOCOL.md "restore").
    case restore = 0x27
    /// One Secret Service item to copy into the keychain (`latchkey migrate`).
    case importSecretServiceItem = 0x28
    /// pam_latchkey: a master key derived from the login password, and the device factor.
    case keyHandoff = 0x30
    /// pam_latchkey: a login session opened.
    case sessionOpen = 0x31
    /// pam_latchkey: a login session closed.
    case sessionClose = 0x32
    /// pam_latchkey: a login session opened, with what the module knows of it (its logind session).
    case sessionOpenWithDetails = 0x33

    /// The opcodes a uid-0 peer (pam_latchkey, running as root) may send; everything else is
    /// reserved to the user's own processes (docs/PROTOCOL.md "Hand-off").
    package var permittedForRoot: Bool {
        switch self {
        case .hello, .keyHandoff, .sessionOpen, .sessionClose, .sessionOpenWithDetails: true
        default: false
        }
    }

    /// The opcodes only a uid-0 peer may send: opening and closing login sessions. A session keeps the
    /// keychain unlocked until its login ends, and the table of sessions is bounded, so a process of the
    /// user that could open them could keep the keys past the logout or fill the table; only the login
    /// process (pam_latchkey, as root) knows when a login begins and ends (docs/PROTOCOL.md §4a).
    package var requiresRoot: Bool {
        switch self {
        case .sessionOpen, .sessionClose, .sessionOpenWithDetails: true
        default: false
        }
    }
}

/// The keys of the `hello` response dictionary.
package enum HelloKey {
    /// Int: the agent's protocol version.
    package static let protocolVersion = "protocol"
    /// String: the agent's software version.
    package static let agent = "agent"
    /// Int: the agent's process id.
    package static let pid = "pid"
}

/// One request from a client to the agent.
///
/// Passwords are `SecretBytes`: decoded straight from the frame into locked memory. `description` names
/// only the opcode, so logging a request can leak neither a password nor attribute values.
package enum Request: Sendable, Equatable, CustomStringConvertible {
    /// Opcode 0x01.
    case hello
    /// Opcode 0x10: the `SecItemAdd` attributes.
    case add(SecDictionary)
    /// Opcode 0x11: the `SecItemCopyMatching` query.
    case copyMatching(SecDictionary)
    /// Opcode 0x12: the `SecItemUpdate` query and attributes to update.
    case update(query: SecDictionary, attributes: SecDictionary)
    /// Opcode 0x13: the `SecItemDelete` query.
    case delete(SecDictionary)
    /// Opcode 0x14: the key's persistent reference, the operation, the algorithm and the input
    /// (docs/PROTOCOL.md, "Key operations").
    case keyOperation(SecDictionary)
    /// Opcode 0x15: the `SecKeyCreateRandomKey` parameters.
    case generateKey(SecDictionary)
    /// An authentication context: `ContextField` keys (docs/PROTOCOL.md, "evaluateContext").
    case evaluateContext(SecDictionary)
    /// The handle of a context to invalidate (`contextHandleLength` bytes).
    case invalidateContext(handle: [UInt8])
    /// Opcode 0x20.
    case status
    /// Opcode 0x21: the new keychain's password and options ("argon2.t", "argon2.m", "argon2.p", ...).
    case create(password: SecretBytes, options: SecDictionary)
    /// Opcode 0x22.
    case unlock(password: SecretBytes)
    /// Opcode 0x23: `all` locks every password class, otherwise only the WhenUnlocked family.
    case lock(all: Bool)
    /// Opcode 0x24.
    case changePassword(old: SecretBytes, new: SecretBytes)
    /// Opcode 0x25: the keychain password and the access groups this connection may then use besides
    /// the caller's own (`allAccessGroups` for every group). The administrator's tool asks for it
    /// (`latchkey --access-group`); docs/PROTOCOL.md "authorizeGroups".
    case authorizeGroups(password: SecretBytes, groups: [String])
    /// Opcode 0x26: the keychain password, the backup key (32 bytes, Argon2id of the backup passphrase)
    /// and the header's options (`"argon2.t"`, `"argon2.m"`, `"argon2.p"`, `"salt"`); docs/BACKUP.md.
    case backup(password: SecretBytes, key: SecretBytes, options: SecDictionary)
    /// Opcode 0x27: one step of a restore (`"step"`: `"begin"`, `"data"`, `"check"` or `"commit"`). The
    /// password and key are given with `"begin"` and empty otherwise; docs/PROTOCOL.md "restore".
    case restore(password: SecretBytes, key: SecretBytes, options: SecDictionary)
    /// Opcode 0x28: one Secret Service item read from another provider, to store as the D-Bus `CreateItem`
    /// would (its collection, label, attributes, secret and content type, and what to do with an item
    /// of the same attributes; docs/PROTOCOL.md "importSecretServiceItem").
    case importSecretServiceItem(SecDictionary)
    /// Opcode 0x30: master key (32 bytes) and device factor (32 bytes, or nil when the sender has none).
    case keyHandoff(masterKey: SecretBytes, deviceFactor: SecretBytes?)
    /// Opcode 0x31: a session token (16 bytes) chosen by pam_latchkey.
    case sessionOpen(token: [UInt8])
    /// Opcode 0x32: the token of a session that ended.
    case sessionClose(token: [UInt8])
    /// Opcode 0x33: a session token, as for 0x31, and the id logind gave the session (`XDG_SESSION_ID`),
    /// when the module knows it.
    case sessionOpenWithDetails(token: [UInt8], logindSession: String?)

    /// The group list of `authorizeGroups` that means every access group.
    package static let allAccessGroups = "*"
    /// Most groups one `authorizeGroups` names.
    package static let maxAuthorizedGroups = 64
    /// Longest access group name, in UTF-8 bytes.
    package static let maxAccessGroupLength = 256

    /// Length of the backup key of `backup` and `restore`.
    package static let backupKeyLength = 32

    /// Length of the master key and device factor in a key hand-off.
    package static let handoffKeyLength = 32
    /// Length of a session token.
    package static let sessionTokenLength = 16
    /// Bytes of an authentication context's handle (`SecKeys.authenticationContextLength`).
    package static let contextHandleLength = SecKeys.authenticationContextLength
    /// The key of the logind session id in the details of `sessionOpenWithDetails`.
    package static let logindSessionKey = "logind"
    /// The longest logind session id accepted (systemd's are at most 21 characters: "c" and a counter, or
    /// an audit session number).
    package static let maxLogindSessionLength = 32

    /// Whether `id` is a logind session id as systemd makes them: 1 to `maxLogindSessionLength` ASCII
    /// letters and digits.
    package static func isValidLogindSession(_ id: String) -> Bool {
        let bytes = id.utf8
        return (1...maxLogindSessionLength).contains(bytes.count)
            && bytes.allSatisfy {
                (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0)
            }
    }

    /// This request's opcode.
    package var opcode: Opcode {
        switch self {
        case .hello: .hello
        case .add: .add
        case .copyMatching: .copyMatching
        case .update: .update
        case .delete: .delete
        case .keyOperation: .keyOperation
        case .generateKey: .generateKey
        case .evaluateContext: .evaluateContext
        case .invalidateContext: .invalidateContext
        case .status: .status
        case .create: .create
        case .unlock: .unlock
        case .lock: .lock
        case .changePassword: .changePassword
        case .authorizeGroups: .authorizeGroups
        case .backup: .backup
        case .restore: .restore
        case .importSecretServiceItem: .importSecretServiceItem
        case .keyHandoff: .keyHandoff
        case .sessionOpen: .sessionOpen
        case .sessionClose: .sessionClose
        case .sessionOpenWithDetails: .sessionOpenWithDetails
        }
    }

    /// The opcode's name only; never a password or attribute value.
    package var description: String { "Request.\(opcode)" }

    /// Compares passwords in constant time, so tests and callers cannot build a timing oracle from it.
    package static func == (a: Request, b: Request) -> Bool {
        switch (a, b) {
        case (.hello, .hello), (.status, .status): true
        case (.evaluateContext(let x), .evaluateContext(let y)): x == y
        case (.invalidateContext(let x), .invalidateContext(let y)): x == y
        case (.add(let x), .add(let y)), (.copyMatching(let x), .copyMatching(let y)), (.delete(let x), .delete(let y)),
            (.keyOperation(let x), .keyOperation(let y)), (.generateKey(let x), .generateKey(let y)),
            (.importSecretServiceItem(let x), .importSecretServiceItem(let y)):
            x == y
        case (.update(let q1, let a1), .update(let q2, let a2)): q1 == q2 && a1 == a2
        case (.create(let p1, let o1), .create(let p2, let o2)): p1.constantTimeEquals(p2) && o1 == o2
        case (.unlock(let p1), .unlock(let p2)): p1.constantTimeEquals(p2)
        case (.lock(let x), .lock(let y)): x == y
        case (.changePassword(let o1, let n1), .changePassword(let o2, let n2)):
            o1.constantTimeEquals(o2) && n1.constantTimeEquals(n2)
        case (.authorizeGroups(let p1, let g1), .authorizeGroups(let p2, let g2)): p1.constantTimeEquals(p2) && g1 == g2
        case (.backup(let p1, let k1, let o1), .backup(let p2, let k2, let o2)),
            (.restore(let p1, let k1, let o1), .restore(let p2, let k2, let o2)):
            p1.constantTimeEquals(p2) && k1.constantTimeEquals(k2) && o1 == o2
        case (.keyHandoff(let m1, let d1), .keyHandoff(let m2, let d2)):
            m1.constantTimeEquals(m2) && (d1 == nil) == (d2 == nil) && (d1.map { d2!.constantTimeEquals($0) } ?? true)
        case (.sessionOpen(let x), .sessionOpen(let y)), (.sessionClose(let x), .sessionClose(let y)): x == y
        case (.sessionOpenWithDetails(let x, let i), .sessionOpenWithDetails(let y, let j)): x == y && i == j
        default: false
        }
    }

    /// Zeroes the item data (`v_Data` and any other data value) this request carries, in place; the
    /// agent calls it once the response is sent. See `SecValue.wipeDataInPlace()`.
    package func wipeItemData() {
        switch self {
        case .add(let d), .copyMatching(let d), .delete(let d), .keyOperation(let d), .generateKey(let d),
            .importSecretServiceItem(let d):
            SecValue.dictionary(d).wipeDataInPlace()
        case .update(let query, let attributes):
            SecValue.dictionary(query).wipeDataInPlace()
            SecValue.dictionary(attributes).wipeDataInPlace()
        case .hello, .status, .create, .unlock, .lock, .changePassword, .authorizeGroups, .keyHandoff, .sessionOpen,
            .sessionClose, .sessionOpenWithDetails, .evaluateContext, .invalidateContext, .backup, .restore:
            break  // secrets here are SecretBytes, which wipe themselves
        }
    }

    // MARK: Encoding

    /// The payload (version, opcode, body) without the frame length prefix.
    ///
    /// The array is allocated once at its exact size, so for create/unlock/changePassword it is the only
    /// copy of the password outside `SecretBytes`: wipe it with `SecretBytes.wipe(_:)` once written.
    package func encode() -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(encodedSize)
        out.append(Wire.protocolVersion)
        out.append(opcode.rawValue)
        switch self {
        case .hello, .status:
            break
        case .add(let d), .copyMatching(let d), .delete(let d), .keyOperation(let d), .generateKey(let d),
            .importSecretServiceItem(let d):
            ValueCodec.encode(.dictionary(d), into: &out)
        case .update(let query, let attributes):
            ValueCodec.encode(.dictionary(query), into: &out)
            ValueCodec.encode(.dictionary(attributes), into: &out)
        case .create(let password, let options):
            out.appendSecret(password)
            ValueCodec.encode(.dictionary(options), into: &out)
        case .unlock(let password):
            out.appendSecret(password)
        case .lock(let all):
            out.append(all ? 0x01 : 0x00)
        case .changePassword(let old, let new):
            out.appendSecret(old)
            out.appendSecret(new)
        case .authorizeGroups(let password, let groups):
            out.appendSecret(password)
            ValueCodec.encode(Self.groupList(groups), into: &out)
        case .backup(let password, let key, let options), .restore(let password, let key, let options):
            out.appendSecret(password)
            out.appendSecret(key)
            ValueCodec.encode(.dictionary(options), into: &out)
        case .keyHandoff(let master, let factor):
            out.appendSecret(master)
            out.appendSecret(factor ?? SecretBytes(count: 0))
        case .sessionOpen(let token), .sessionClose(let token):
            out += token
        case .evaluateContext(let d):
            ValueCodec.encode(.dictionary(d), into: &out)
        case .invalidateContext(let handle):
            out += handle
        case .sessionOpenWithDetails(let token, let logindSession):
            out += token
            ValueCodec.encode(.dictionary(Self.sessionDetails(logindSession)), into: &out)
        }
        assert(out.count == encodedSize, "encodedSize out of step with encode()")
        return out
    }

    /// Number of bytes `encode()` produces.
    package var encodedSize: Int {
        let header = 2
        let secretHeader = 4
        return switch self {
        case .hello, .status: header
        case .add(let d), .copyMatching(let d), .delete(let d), .keyOperation(let d), .generateKey(let d),
            .importSecretServiceItem(let d):
            header + ValueCodec.encodedSize(.dictionary(d))
        case .update(let q, let a):
            header + ValueCodec.encodedSize(.dictionary(q)) + ValueCodec.encodedSize(.dictionary(a))
        case .create(let p, let o): header + secretHeader + p.count + ValueCodec.encodedSize(.dictionary(o))
        case .unlock(let p): header + secretHeader + p.count
        case .lock: header + 1
        case .changePassword(let o, let n): header + 2 * secretHeader + o.count + n.count
        case .authorizeGroups(let p, let g): header + secretHeader + p.count + ValueCodec.encodedSize(Self.groupList(g))
        case .backup(let p, let k, let o), .restore(let p, let k, let o):
            header + 2 * secretHeader + p.count + k.count + ValueCodec.encodedSize(.dictionary(o))
        case .keyHandoff(let m, let d): header + 2 * secretHeader + m.count + (d?.count ?? 0)
        case .sessionOpen(let t), .sessionClose(let t): header + t.count
        case .evaluateContext(let d): header + ValueCodec.encodedSize(.dictionary(d))
        case .invalidateContext(let handle): header + handle.count
        case .sessionOpenWithDetails(let t, let logindSession):
            header + t.count + ValueCodec.encodedSize(.dictionary(Self.sessionDetails(logindSession)))
        }
    }

    // MARK: Decoding

    /// Decodes a request payload (as `FrameIO.readFrame` returns it), leaving `payload` untouched.
    ///
    /// The payload may hold a password; the agent should use `decode(wiping:)` instead.
    /// Throws `.unsupportedVersion` or `.unknownOpcode` (the agent answers errSecUnimplemented) or
    /// `.malformed` / `.truncated` (errSecParam).
    package static func decode(_ payload: [UInt8]) throws(WireError) -> Request {
        let result = payload.withUnsafeBytes { raw in
            Result { () throws(WireError) -> Request in try decode(raw) }
        }
        return try result.get()
    }

    /// Decodes a request payload and then wipes `payload` in place, whether or not decoding succeeded.
    ///
    /// Passwords are copied straight from the buffer into `SecretBytes`, so after this call the only
    /// copies live in locked memory. Pass the array `FrameIO.readFrame` returned and keep no other
    /// reference to it (another reference would make the wipe copy the buffer instead).
    package static func decode(wiping payload: inout [UInt8]) throws(WireError) -> Request {
        let result = payload.withUnsafeBytes { raw in
            Result { () throws(WireError) -> Request in try decode(raw) }
        }
        SecretBytes.wipe(&payload)
        return try result.get()
    }

    private static func decode(_ raw: UnsafeRawBufferPointer) throws(WireError) -> Request {
        var reader = WireReader(raw)
        let version = try reader.u8()
        guard version == Wire.protocolVersion else { throw .unsupportedVersion(version) }
        let opcodeByte = try reader.u8()
        guard let opcode = Opcode(rawValue: opcodeByte) else { throw .unknownOpcode(opcodeByte) }
        let request: Request
        switch opcode {
        case .hello: request = .hello
        case .status: request = .status
        case .add: request = .add(try reader.dictionary())
        case .copyMatching: request = .copyMatching(try reader.dictionary())
        case .delete: request = .delete(try reader.dictionary())
        case .keyOperation: request = .keyOperation(try reader.dictionary())
        case .generateKey: request = .generateKey(try reader.dictionary())
        case .evaluateContext: request = .evaluateContext(try reader.dictionary())
        case .invalidateContext: request = .invalidateContext(handle: Array(try reader.bytes(contextHandleLength)))
        case .importSecretServiceItem: request = .importSecretServiceItem(try reader.dictionary())
        case .update:
            let query = try reader.dictionary()
            request = .update(query: query, attributes: try reader.dictionary())
        case .create:
            let password = try reader.secret()
            request = .create(password: password, options: try reader.dictionary())
        case .unlock:
            request = .unlock(password: try reader.secret())
        case .lock:
            let flags = try reader.u8()
            // Undefined bits must be zero so a later version can give them a meaning safely.
            guard flags & ~0x01 == 0 else { throw .malformed("undefined lock flags \(hexByte(flags))") }
            request = .lock(all: flags & 0x01 != 0)
        case .changePassword:
            let old = try reader.secret()
            request = .changePassword(old: old, new: try reader.secret())
        case .authorizeGroups:
            let password = try reader.secret()
            guard case .array(let values) = try reader.value(), (1...maxAuthorizedGroups).contains(values.count) else {
                throw .malformed("authorizeGroups needs a list of 1 to \(maxAuthorizedGroups) access groups")
            }
            var groups: [String] = []
            for value in values {
                guard case .string(let group) = value, !group.isEmpty, group.utf8.count <= maxAccessGroupLength else {
                    throw .malformed("an access group is a string of 1 to \(maxAccessGroupLength) bytes")
                }
                groups.append(group)
            }
            request = .authorizeGroups(password: password, groups: groups)
        case .backup, .restore:
            let password = try reader.secret()
            let key = try reader.secret()
            // A backup key is Argon2id's 32 bytes; a restore's later steps carry none.
            guard key.count == backupKeyLength || (opcode == .restore && key.count == 0) else {
                throw .malformed("a backup key must be \(backupKeyLength) bytes")
            }
            let options = try reader.dictionary()
            request =
                opcode == .backup
                ? .backup(password: password, key: key, options: options)
                : .restore(password: password, key: key, options: options)
        case .keyHandoff:
            let master = try reader.secret()
            let factor = try reader.secret()
            guard master.count == handoffKeyLength else { throw .malformed("master key must be 32 bytes") }
            guard factor.count == 0 || factor.count == handoffKeyLength else {
                throw .malformed("device factor must be 0 or 32 bytes")
            }
            request = .keyHandoff(masterKey: master, deviceFactor: factor.count == 0 ? nil : factor)
        case .sessionOpen, .sessionClose:
            let token = Array(try reader.bytes(sessionTokenLength))
            request = opcode == .sessionOpen ? .sessionOpen(token: token) : .sessionClose(token: token)
        case .sessionOpenWithDetails:
            let token = Array(try reader.bytes(sessionTokenLength))
            let details = try reader.dictionary()
            // Keys this version does not know are ignored (a newer module may send more); a known key
            // with a value of the wrong type or shape is malformed.
            var logindSession: String?
            if let value = details[logindSessionKey] {
                guard case .string(let id) = value, isValidLogindSession(id) else {
                    throw .malformed(
                        "logind session id must be 1 to \(maxLogindSessionLength) ASCII letters and digits")
                }
                logindSession = id
            }
            request = .sessionOpenWithDetails(token: token, logindSession: logindSession)
        }
        try reader.expectEnd()
        return request
    }

    /// The group list of `authorizeGroups` as a value.
    private static func groupList(_ groups: [String]) -> SecValue {
        .array(groups.map { .string($0) })
    }

    /// The details dictionary of `sessionOpenWithDetails`.
    private static func sessionDetails(_ logindSession: String?) -> SecDictionary {
        logindSession.map { [logindSessionKey: .string($0)] } ?? [:]
    }
}
