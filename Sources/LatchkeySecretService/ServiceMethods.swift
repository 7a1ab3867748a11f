import LatchkeyDesktop
import LatchkeyEngine
import LatchkeyModel

/// `org.freedesktop.Secret.Service` at /org/freedesktop/secrets, and `Session.Close`.
extension SecretService {
    func handleService(_ call: BusMessage, _ member: String, _ interface: String?, _ bus: Bus) throws -> Bus.Dispatch {
        guard Self.addressed(interface, SS.Interface.service) else { throw Self.unknownMethod(interface, member) }
        let sender = call.sender ?? ""
        switch member {
        case "OpenSession":
            let arguments = try Arguments.read(call, "sv")
            guard case .variant(let input) = arguments[1] else { throw SecretServiceErrors.invalidArgs("input must be a variant") }
            let (output, path) = try sessions.open(algorithm: try Arguments.string(arguments[0]), input: input, owner: sender)
            try call.reply([output, .objectPath(path)])

        case "CreateCollection":
            let arguments = try Arguments.read(call, "a{sv}s")
            let properties = try Arguments.properties(arguments[0])
            let label = try properties[SS.Property.collectionLabel].map(Arguments.label) ?? ""
            let alias = try Arguments.string(arguments[1])
            if !alias.isEmpty { try SecretServiceKeychain.validateAlias(alias) }
            if engine.lockState().collectionsLocked {
                guard let prompt = prompts.add(owner: sender, action: .createCollection(label: label, alias: alias)) else {
                    throw BusError(name: SS.ErrorName.limitsExceeded, message: "too many pending prompts")
                }
                try call.reply([.objectPath(SS.noObject), .objectPath(prompt)])
            } else {
                let path = try createCollection(label: label, alias: alias, bus)
                try call.reply([.objectPath(path), .objectPath(SS.noObject)])
            }

        case "SearchItems":
            let arguments = try Arguments.read(call, "a{ss}", limits: Arguments.attributeLimits)
            let found = try engine.search(try Arguments.attributes(arguments[0]))
            try call.reply([Arguments.objectPathList(found.filter { !$0.locked }.map { ObjectPath.itemPath($0.collection, $0.id) }),
                            Arguments.objectPathList(found.filter(\.locked).map { ObjectPath.itemPath($0.collection, $0.id) })])

        case "Unlock":
            let objects = try Arguments.objectPaths(try Arguments.read(call, "ao")[0])
            var unlocked: [String] = []
            var locked: [String] = []
            for path in objects {
                switch try? lockedState(of: path) {
                case false?: unlocked.append(path)
                case true?: locked.append(path)
                case nil: continue  // not ours or gone: nothing to unlock
                }
            }
            var prompt = SS.noObject
            if !locked.isEmpty {
                guard let path = prompts.add(owner: sender, action: .unlock(locked)) else {
                    throw BusError(name: SS.ErrorName.limitsExceeded, message: "too many pending prompts")
                }
                prompt = path
            }
            try call.reply([Arguments.objectPathList(unlocked), .objectPath(prompt)])

        case "Lock":
            let objects = try Arguments.objectPaths(try Arguments.read(call, "ao")[0])
            if keychain.lock(all: false) { log.info("Secret Service: locked WhenUnlocked classes (\(sender))") }
            let locked = objects.filter { (try? lockedState(of: $0)) == true }
            try call.reply([Arguments.objectPathList(locked), .objectPath(SS.noObject)])
            checkLockState(bus)

        case "GetSecrets":
            let arguments = try Arguments.read(call, "aoo")
            let items = try Arguments.objectPaths(arguments[0])
            let sessionPath = try Arguments.objectPath(arguments[1])
            let session = try sessions.session(sessionPath, caller: sender)
            var secrets: [SecretServiceSecret] = []
            var entries: [(BusValue, BusValue)] = []
            defer {
                for secret in secrets { secret.wipe() }
                for entry in entries { entry.1.wipeByteArrays() }
            }
            for path in items {
                // As gnome-keyring does: a locked item, or a path that names no item, is left out of
                // the reply, and the client gets the secrets of the others (docs/SECRET-SERVICE.md §4).
                guard let secret = try readableSecret(at: path) else { continue }
                secrets.append(secret)
                entries.append((.objectPath(path), try sessions.encode(secret, sessionPath: sessionPath, session: session)))
            }
            try call.reply([.dictionary(keyType: "o", valueType: "(oayays)", entries)])

        case "ReadAlias":
            let name = try Arguments.string(try Arguments.read(call, "s")[0])
            let state = try currentState()
            let path = state.aliases[name].flatMap { state.collection($0) }.map { ObjectPath.collectionPath($0.id) } ?? SS.noObject
            try call.reply([.objectPath(path)])

        case "SetAlias":
            let arguments = try Arguments.read(call, "so")
            let name = try Arguments.string(arguments[0])
            let target = try Arguments.objectPath(arguments[1])
            if target == SS.noObject {
                try engine.setAlias(name, to: nil)
            } else {
                guard case .collection(let collection)? = ObjectPath(target) else {
                    throw SecretServiceErrors.noSuchObject("\(target) is not a collection")
                }
                let id = try collectionID(collection)
                try engine.setAlias(name, to: id)
                emit(bus, SS.root, SS.Interface.service, "CollectionChanged", [.objectPath(ObjectPath.collectionPath(id))])
            }
            try call.reply()

        default:
            throw Self.unknownMethod(interface, member)
        }
        return .handled
    }

    func handleSession(_ call: BusMessage, _ n: UInt64, _ member: String, _ interface: String?) throws -> Bus.Dispatch {
        guard sessions.exists(n, caller: call.sender ?? "") else {
            throw SecretServiceErrors.noSuchObject("no such session")
        }
        guard Self.addressed(interface, SS.Interface.session), member == "Close" else { throw Self.unknownMethod(interface, member) }
        _ = try Arguments.read(call, "")
        sessions.close(n)
        try call.reply()
        return .handled
    }

    /// The secret of the item at `path` for `GetSecrets`; nil when the item is locked or there is no
    /// such item. Other failures (a damaged item, no keychain) are thrown and fail the whole call.
    func readableSecret(at path: String) throws -> SecretServiceSecret? {
        guard case .item(let name, let id)? = ObjectPath(path) else { return nil }
        do {
            return try engine.secret(id, in: try collectionID(name))
        } catch {
            let mapped = SecretServiceErrors.map(error)
            if mapped.name == SS.ErrorName.isLocked || mapped.name == SS.ErrorName.noSuchObject { return nil }
            throw mapped
        }
    }

    /// Whether the object at `path` (a collection or an item) is locked now; throws for anything else.
    func lockedState(of path: String) throws -> Bool {
        switch ObjectPath(path) {
        case .collection(let name)?:
            _ = try collectionID(name)
            return engine.lockState().collectionsLocked
        case .item(let name, let id)?:
            do {
                return try itemInfo(name, id).locked
            } catch let error as BusError where error.name == SS.ErrorName.isLocked {
                return true
            }
        default:
            throw SecretServiceErrors.noSuchObject("\(path) cannot be locked or unlocked")
        }
    }

    /// Creates a collection (the keychain is unlocked) and announces it; returns its path.
    func createCollection(label: String, alias: String, _ bus: Bus) throws -> String {
        let (collection, created) = try engine.createCollection(label: label, alias: alias)
        let path = ObjectPath.collectionPath(collection.id)
        if created {
            log.info("Secret Service: created the collection '\(collection.id)'")
            emit(bus, SS.root, SS.Interface.service, "CollectionCreated", [.objectPath(path)])
            propertiesChanged(bus, SS.root, SS.Interface.service, invalidated: ["Collections"])
        }
        return path
    }
}

extension SecretServiceKeychain {
    /// Alias names appear in object paths: `[A-Za-z0-9_]`, 1–64 bytes.
    static func validateAlias(_ name: String) throws(SecError) {
        guard !name.isEmpty, name.utf8.count <= SecretServiceLimits.maxIdentifierBytes,
              name.utf8.allSatisfy(ObjectPath.isPathCharacter) else {
            throw .param("an alias must be 1–\(SecretServiceLimits.maxIdentifierBytes) characters of [A-Za-z0-9_]")
        }
    }
}
