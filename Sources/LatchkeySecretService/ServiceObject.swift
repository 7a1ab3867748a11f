import LatchkeyDBus
import LatchkeyEngine
import LatchkeyModel

/// `org.freedesktop.Secret.Service` at /org/freedesktop/secrets.
struct ServiceObject: SecretServiceObject {
    let service: SecretService
    let bus: Bus

    static let interfaces = [
        BusInterface<ServiceObject>(
            SS.Interface.service,
            methods: [
                BusMethod(
                    "OpenSession", in: [("algorithm", "s"), ("input", "v")], out: [("output", "v"), ("result", "o")]
                ) {
                    try $0.openSession($1)
                },
                BusMethod(
                    "CreateCollection", in: [("properties", "a{sv}"), ("alias", "s")],
                    out: [("collection", "o"), ("prompt", "o")]
                ) { try $0.createCollection($1) },
                BusMethod(
                    "SearchItems", in: [("attributes", "a{ss}")], out: [("unlocked", "ao"), ("locked", "ao")],
                    limits: Arguments.attributeLimits
                ) { try $0.searchItems($1) },
                BusMethod("Unlock", in: [("objects", "ao")], out: [("unlocked", "ao"), ("prompt", "o")]) {
                    try $0.unlock($1)
                },
                BusMethod("Lock", in: [("objects", "ao")], out: [("locked", "ao"), ("Prompt", "o")]) {
                    try $0.lock($1)
                },
                BusMethod("GetSecrets", in: [("items", "ao"), ("session", "o")], out: [("secrets", "a{o(oayays)}")]) {
                    try $0.getSecrets($1)
                },
                BusMethod("ReadAlias", in: [("name", "s")], out: [("collection", "o")]) { try $0.readAlias($1) },
                BusMethod("SetAlias", in: [("name", "s"), ("collection", "o")]) { try $0.setAlias($1) },
            ],
            properties: [
                BusProperty("Collections", "ao") { object in
                    Arguments.objectPathList(
                        try object.service.currentState().collections.map { ObjectPath.collectionPath($0.id) })
                }
            ],
            signals: [
                BusSignal("CollectionCreated", [("collection", "o")]),
                BusSignal("CollectionDeleted", [("collection", "o")]),
                BusSignal("CollectionChanged", [("collection", "o")]),
            ])
    ]

    func childNodes() -> [String] { ["collection", "aliases", "session", "prompt"] }

    func openSession(_ call: BusMethodCall) throws {
        let (output, path) = try sessions.open(
            algorithm: try call.string(0), input: try call.variant(1), owner: call.sender)
        try call.reply([output, .objectPath(path)])
    }

    func createCollection(_ call: BusMethodCall) throws {
        let properties = try Arguments.properties(call.arguments[0])
        let label = try properties[SS.Property.collectionLabel].map(Arguments.label) ?? ""
        let alias = try call.string(1)
        if !alias.isEmpty { try SecretServiceKeychain.validateAlias(alias) }
        if let id = SecretService.builtInAliases[alias] {
            // The alias names a collection, so that one is returned (the specification's rule), at once:
            // these two always exist.
            try call.reply([.objectPath(ObjectPath.collectionPath(id)), .objectPath(SS.noObject)])
            return
        }
        if engine.lockState().collectionsLocked {
            guard let prompt = prompts.add(owner: call.sender, action: .createCollection(label: label, alias: alias))
            else {
                throw BusError(name: SS.ErrorName.limitsExceeded, message: "too many pending prompts")
            }
            try call.reply([.objectPath(SS.noObject), .objectPath(prompt)])
        } else {
            let path = try service.createCollection(label: label, alias: alias, bus)
            try call.reply([.objectPath(path), .objectPath(SS.noObject)])
        }
    }

    func searchItems(_ call: BusMethodCall) throws {
        let query = try Arguments.attributes(call.arguments[0])
        let found: [SecretServiceItemInfo]
        do {
            found = try service.search(query)
        } catch let error as SecError where error.status == SecStatus.interactionNotAllowed {
            // Never unlocked: the search itself, as one locked item (PendingSearches).
            guard let pending = service.pendingSearchPath(query, in: nil, caller: call.sender) else { throw error }
            try call.reply([Arguments.objectPathList([]), Arguments.objectPathList([pending])])
            return
        }
        try call.reply([
            Arguments.objectPathList(found.filter { !$0.locked }.map { ObjectPath.itemPath($0.collection, $0.id) }),
            Arguments.objectPathList(found.filter(\.locked).map { ObjectPath.itemPath($0.collection, $0.id) }),
        ])
    }

    func unlock(_ call: BusMethodCall) throws {
        let objects = try Arguments.objectPaths(call.arguments[0])
        var unlocked: [String] = []
        var locked: [String] = []
        for path in objects {
            switch service.pendingMatches(path, caller: call.sender) {
            case .locked?:
                locked.append(path)
                continue
            case .found(let items)?:
                // The search can be evaluated now: its matches stand for it.
                for item in items {
                    let itemPath = ObjectPath.itemPath(item.collection, item.id)
                    if item.locked { locked.append(itemPath) } else { unlocked.append(itemPath) }
                }
                continue
            case nil: break
            }
            switch try? service.lockedState(of: path) {
            case false?: unlocked.append(path)
            case true?: locked.append(path)
            case nil: continue  // not ours or gone: nothing to unlock
            }
        }
        var prompt = SS.noObject
        if !locked.isEmpty {
            guard let path = prompts.add(owner: call.sender, action: .unlock(locked)) else {
                throw BusError(name: SS.ErrorName.limitsExceeded, message: "too many pending prompts")
            }
            prompt = path
        }
        try call.reply([Arguments.objectPathList(unlocked), .objectPath(prompt)])
    }

    func lock(_ call: BusMethodCall) throws {
        let objects = try Arguments.objectPaths(call.arguments[0])
        if service.keychain.lock(all: false) {
            service.log.info("Secret Service: locked WhenUnlocked classes (\(call.sender))")
        }
        let locked = objects.filter { (try? service.lockedState(of: $0)) == true }
        try call.reply([Arguments.objectPathList(locked), .objectPath(SS.noObject)])
        service.checkLockState(bus)
    }

    func getSecrets(_ call: BusMethodCall) throws {
        let items = try Arguments.objectPaths(call.arguments[0])
        let sessionPath = try call.objectPath(1)
        let session = try sessions.session(sessionPath, caller: call.sender)
        var secrets: [SecretServiceSecret] = []
        var entries: [(BusValue, BusValue)] = []
        defer {
            for secret in secrets { secret.wipe() }
            for entry in entries { entry.1.wipeByteArrays() }
        }
        for path in items {
            // As gnome-keyring does: a locked item, or a path that names no item, is left out of
            // the reply, and the client gets the secrets of the others (docs/SECRET-SERVICE.md §4).
            guard let secret = try service.readableSecret(at: path, caller: call.sender) else { continue }
            secrets.append(secret)
            entries.append((.objectPath(path), try sessions.encode(secret, sessionPath: sessionPath, session: session)))
        }
        try call.reply([.dictionary(keyType: "o", valueType: "(oayays)", entries)])
    }

    func readAlias(_ call: BusMethodCall) throws {
        let name = try call.string(0)
        let state = try service.currentState()
        let path =
            state.aliases[name].flatMap { state.collection($0) }.map { ObjectPath.collectionPath($0.id) } ?? SS.noObject
        try call.reply([.objectPath(path)])
    }

    func setAlias(_ call: BusMethodCall) throws {
        let name = try call.string(0)
        let target = try call.objectPath(1)
        if SecretService.builtInAliases[name] != nil {
            throw BusError(name: SS.ErrorName.notSupported, message: "the alias '\(name)' cannot be changed")
        }
        if target == SS.noObject {
            try engine.setAlias(name, to: nil)
        } else {
            guard case .collection(let collection)? = ObjectPath(target) else {
                throw SecretServiceErrors.noSuchObject("\(target) is not a collection")
            }
            let id = try service.collectionID(collection)
            guard id != SessionCollection.id else {
                // What is stored through an alias (the default collection's) must outlive the agent.
                throw BusError(name: SS.ErrorName.notSupported, message: "the session collection cannot be aliased")
            }
            try engine.setAlias(name, to: id)
            service.emit(
                bus, SS.root, SS.Interface.service, "CollectionChanged", [.objectPath(ObjectPath.collectionPath(id))])
            // The alias path now shows another collection: its values, for proxies made on that path.
            service.collectionPropertiesChanged(
                bus, id, ["Items", "Label", "Locked", "Created", "Modified"], paths: [ObjectPath.aliasPath(name)])
        }
        try call.reply()
    }
}

/// What the service's methods share with the other objects' and with prompts.
extension SecretService {
    /// The secret of the item at `path` for `GetSecrets` (for a pending search of `caller`'s, its first
    /// match's); nil when the item is locked or there is no such item. Other failures (a damaged item,
    /// no keychain) are thrown and fail the whole call.
    func readableSecret(at path: String, caller: String) throws -> SecretServiceSecret? {
        guard case .item(let name, let id)? = ObjectPath(path) else { return nil }
        do {
            switch try pendingTarget(id, caller: caller) {
            case nil: return try secret(id, in: try collectionID(name))
            case .item(let match)?: return try secret(match.id, in: match.collection)
            case .locked?, .nothing?: return nil
            }
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
            collectionsChanged(bus)
        }
        return path
    }
}

extension SecretServiceKeychain {
    /// Alias names appear in object paths: `[A-Za-z0-9_]`, 1–64 bytes.
    static func validateAlias(_ name: String) throws(SecError) {
        guard !name.isEmpty, name.utf8.count <= SecretServiceLimits.maxIdentifierBytes,
            name.utf8.allSatisfy(ObjectPath.isPathCharacter)
        else {
            throw .param("an alias must be 1–\(SecretServiceLimits.maxIdentifierBytes) characters of [A-Za-z0-9_]")
        }
    }
}
