import LatchkeyCrypto
import LatchkeyDBus
import LatchkeySecrets
import LatchkeySystem

/// A client of the Secret Service provider that owns `org.freedesktop.secrets` now (gnome-keyring,
/// KWallet, KeePassXC), for `latchkey migrate`: it lists collections and items, unlocks through the
/// provider's own prompts and reads secrets in an encrypted session. Every call goes to the name's
/// owner at the time it was first asked (its unique name), so a provider replaced midway is noticed
/// as one that went away, never read from silently.
final class SecretServiceSource {
    struct Failure: Error, CustomStringConvertible {
        var description: String
        /// The D-Bus error name, when the provider answered with an error.
        var errorName: String?
        init(_ description: String, errorName: String? = nil) {
            self.description = description
            self.errorName = errorName
        }
    }

    /// A collection of the provider.
    struct Collection {
        var path: String
        var label: String
    }

    /// An item's label and attributes (its secret is read separately, in batches).
    struct ItemProperties {
        var label: String
        var attributes: [(name: String, value: String)]
    }

    static let serviceName = "org.freedesktop.secrets"
    static let root = "/org/freedesktop/secrets"
    static let serviceInterface = "org.freedesktop.Secret.Service"
    static let collectionInterface = "org.freedesktop.Secret.Collection"
    static let itemInterface = "org.freedesktop.Secret.Item"
    static let promptInterface = "org.freedesktop.Secret.Prompt"
    /// How long a provider's prompt may wait for the user before it is dismissed.
    static let promptTimeout: Duration = .seconds(300)
    /// Items per `GetSecrets` call: latchkey's own cap is 1,024; smaller calls keep fewer secrets in
    /// memory at once.
    static let secretsPerCall = 128

    private let connection: BusConnection
    /// The provider's unique name on the bus.
    let owner: String
    /// The provider's process id, as the bus daemon reports it.
    let ownerPID: UInt32?
    private var session: (path: String, key: SecretBytes?)?

    /// Connects to the session bus and finds the provider; fails when nothing owns the name.
    init() throws {
        let connection: BusConnection
        do {
            connection = try BusConnection(.session)
        } catch {
            throw Failure("cannot connect to \(BusEndpoint.session): \(error)")
        }
        self.connection = connection
        func bus(_ member: String) throws -> BusValue? {
            try connection.sync { bus in
                try bus.call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus",
                    interface: "org.freedesktop.DBus", member: member, [.string(Self.serviceName)]
                ).arguments().first
            }
        }
        do {
            guard let name = try bus("GetNameOwner")?.string else { throw Failure("no owner") }
            owner = name
        } catch {
            throw Failure(
                "no Secret Service provider owns \(Self.serviceName) on \(BusEndpoint.session): start the one "
                    + "to move from (gnome-keyring, KWallet, KeePassXC) first")
        }
        ownerPID = try? bus("GetConnectionUnixProcessID")?.uint32
    }

    deinit { connection.close() }

    // MARK: - Calls

    /// Calls a method of the provider and returns the reply's arguments.
    private func call(
        _ path: String, _ interface: String, _ member: String, _ arguments: [BusValue] = [],
        timeout: Duration = .seconds(60)
    ) throws -> [BusValue] {
        let owner = owner
        do {
            return try connection.sync { bus in
                try bus.call(
                    destination: owner, path: path, interface: interface, member: member, arguments,
                    timeout: timeout
                ).arguments()
            }
        } catch let error as BusError {
            throw Failure("\(interface).\(member) on \(path): \(error)", errorName: error.name)
        }
    }

    private func property(_ path: String, _ interface: String, _ name: String) throws -> BusValue? {
        try call(path, "org.freedesktop.DBus.Properties", "Get", [.string(interface), .string(name)]).first?
            .variantValue
    }

    private func paths(_ value: BusValue?, _ what: String) throws -> [String] {
        guard let elements = value?.elements else { throw Failure("the provider's \(what) is not a list of paths") }
        return try elements.map {
            guard case .objectPath(let path) = $0 else {
                throw Failure("the provider's \(what) is not a list of paths")
            }
            return path
        }
    }

    // MARK: - Collections and items

    /// The provider's collections, in its order.
    func collections() throws -> [Collection] {
        try paths(try property(Self.root, Self.serviceInterface, "Collections"), "Collections").map {
            Collection(path: $0, label: try property($0, Self.collectionInterface, "Label")?.string ?? "")
        }
    }

    /// The collection the alias `default` names, if any.
    func defaultCollection() -> String? {
        guard let path = try? call(Self.root, Self.serviceInterface, "ReadAlias", [.string("default")]).first?.string,
            path != "/"
        else { return nil }
        return path
    }

    /// The paths of a collection's items.
    func items(of collection: String) throws -> [String] {
        try paths(try property(collection, Self.collectionInterface, "Items"), "Items of \(collection)")
    }

    /// An item's label and attributes.
    func properties(of item: String) throws -> ItemProperties {
        let reply = try call(item, "org.freedesktop.DBus.Properties", "GetAll", [.string(Self.itemInterface)])
        guard let entries = reply.first?.stringKeyedEntries,
            let label = entries["Label"]?.variantValue?.string,
            let map = entries["Attributes"]?.variantValue?.elements
        else { throw Failure("\(item): the provider gave no Label or Attributes") }
        var attributes: [(name: String, value: String)] = []
        for entry in map {
            guard case .dictEntry(let name, let value) = entry, let n = name.string, let v = value.string else {
                throw Failure("\(item): Attributes is not a string map")
            }
            attributes.append((n, v))
        }
        return ItemProperties(label: label, attributes: attributes)
    }

    // MARK: - Unlocking

    /// `Unlock(objects)`, through the provider's prompt when it returns one; returns the objects it
    /// reports unlocked, and whether the user dismissed the prompt.
    func unlock(_ objects: [String]) throws -> (unlocked: [String], dismissed: Bool) {
        let reply = try call(
            Self.root, Self.serviceInterface, "Unlock", [.array(elementType: "o", objects.map { .objectPath($0) })])
        guard reply.count == 2, let prompt = reply[1].string else { throw Failure("Unlock gave no prompt path") }
        var unlocked = try paths(reply[0], "Unlock reply")
        guard prompt != "/" else { return (unlocked, false) }
        let (dismissed, more) = try runPrompt(prompt)
        unlocked += more
        return (unlocked, dismissed)
    }

    /// What a prompt's `Completed` signal said, filled in on the bus's loop thread.
    private final class Completion: @unchecked Sendable {
        let monitor = Monitor()
        var result: (dismissed: Bool, objects: [String])?
    }

    /// Runs a prompt (`Prompt.Prompt("")`) and waits for its `Completed` signal from the provider, at
    /// most `promptTimeout`; then it is dismissed and counts as dismissed.
    private func runPrompt(_ prompt: String) throws -> (dismissed: Bool, objects: [String]) {
        let completion = Completion()
        let owner = owner
        let rule = Bus.signalRule(sender: owner, path: prompt, interface: Self.promptInterface, member: "Completed")
        let slot = try connection.sync { bus in
            // The daemon filters by sender already; the check here is for a rule it did not apply.
            let slot = try bus.addMatch(rule) { message in
                guard message.sender == owner, let arguments = try? message.arguments(), arguments.count == 2,
                    let dismissed = arguments[0].bool
                else { return }
                let objects = arguments[1].variantValue?.elements?.compactMap(\.string) ?? []
                completion.monitor.locked { completion.result = (dismissed, objects) }
                completion.monitor.broadcast()
            }
            return SlotBox(slot)
        }
        defer { _ = try? connection.sync { _ in slot.cancel() } }
        _ = try call(prompt, Self.promptInterface, "Prompt", [.string("")])
        guard completion.monitor.wait(timeout: Self.promptTimeout, until: { completion.result != nil }) else {
            _ = try? call(prompt, Self.promptInterface, "Dismiss")
            return (true, [])
        }
        return completion.monitor.locked { completion.result! }
    }

    // MARK: - Secrets

    /// Opens a session for reading secrets: `dh-ietf1024-sha256-aes128-cbc-pkcs7` (RFC 2409's second
    /// group, HKDF-SHA-256 to an AES-128 key, as docs/SECRET-SERVICE.md §6 describes the agent's), or
    /// `plain` only when the provider offers no encrypted one.
    func openSession() throws -> String {
        if let session { return session.path }
        let pair = try OakleyGroup2KeyPair()
        do {
            let reply = try call(
                Self.root, Self.serviceInterface, "OpenSession",
                [.string("dh-ietf1024-sha256-aes128-cbc-pkcs7"), .variant(.byteArray(try pair.publicKey()))])
            guard reply.count == 2, let peer = reply[0].variantValue?.bytes, let path = reply[1].string else {
                throw Failure("OpenSession gave a malformed reply")
            }
            let shared = try pair.sharedSecret(peer: peer)
            let key = try HKDF.sha256(ikm: shared, salt: [], info: [], count: AES128CBC.keySize)
            session = (path, key)
            return path
        } catch let failure as Failure where failure.errorName == "org.freedesktop.DBus.Error.NotSupported" {
            let reply = try call(
                Self.root, Self.serviceInterface, "OpenSession", [.string("plain"), .variant(.string(""))])
            guard reply.count == 2, let path = reply[1].string else {
                throw Failure("OpenSession gave a malformed reply")
            }
            session = (path, nil)
            return path
        }
    }

    /// Whether secrets travel encrypted on the bus.
    var sessionIsEncrypted: Bool { session?.key != nil }

    /// The secrets and content types of `items` (those the provider could read: unlocked ones). The
    /// caller wipes each secret when done with it.
    func secrets(of items: [String]) throws -> [String: (secret: [UInt8], contentType: String)] {
        let sessionPath = try openSession()
        let reply = try call(
            Self.root, Self.serviceInterface, "GetSecrets",
            [.array(elementType: "o", items.map { .objectPath($0) }), .objectPath(sessionPath)])
        defer { for value in reply { value.wipeByteArrays() } }
        guard let entries = reply.first?.elements else { throw Failure("GetSecrets gave a malformed reply") }
        var result: [String: (secret: [UInt8], contentType: String)] = [:]
        for entry in entries {
            guard case .dictEntry(let pathValue, let secretValue) = entry, let path = pathValue.string,
                let fields = secretValue.fields, fields.count == 4, let parameters = fields[1].bytes,
                let value = fields[2].bytes, let contentType = fields[3].string
            else { throw Failure("GetSecrets gave a malformed secret") }
            if let key = session?.key {
                do {
                    result[path] = (try AES128CBC.decrypt(value, key: key, iv: parameters), contentType)
                } catch {
                    throw Failure("the secret of \(path) cannot be decrypted with the session's key")
                }
            } else {
                // Its own copy: the value read from the message is wiped with the reply.
                result[path] = (value.withUnsafeBufferPointer { Array($0) }, contentType)
            }
        }
        return result
    }
}

/// A match slot handed out of the loop thread (cancelled on it again).
private final class SlotBox: @unchecked Sendable {
    private let slot: BusSlot
    init(_ slot: BusSlot) { self.slot = slot }
    func cancel() { slot.cancel() }
}
