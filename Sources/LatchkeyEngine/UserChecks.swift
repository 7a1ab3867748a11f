import LatchkeyModel
import LatchkeySecrets
import LatchkeySystem

/// An item whose secret is sealed under an application password (docs/ACCESS-CONTROL.md §8), and what
/// its key is derived with.
package struct ApplicationBox: Sendable, Equatable {
    /// The item's persistent reference.
    package let item: [UInt8]
    package let derivation: ApplicationPassword.Derivation
}

/// What a request met that needs the user present before it may go on (phase one of
/// docs/ACCESS-CONTROL.md §3): which items, what each one asks for, and the prompt's text. The engine
/// answers errSecAuthNeeded with this in the request's `UserCheckSession`, returning none of the items'
/// data; the request layer runs the check outside the engine and repeats the request.
package struct UserCheckRequirement: Sendable, Equatable {
    /// Distinguishes this requirement from every other of the session: a grant names the one it answers.
    package let serial: UInt64
    /// The persistent references (16 bytes each) of the items that need a check.
    package let items: [[UInt8]]
    /// The distinct constraints of those items; one check must satisfy them all.
    package let constraints: [AccessConstraint]
    /// `kSecUseOperationPrompt`, when the request gave one.
    package let prompt: String?
    /// What the request wants to do with the items, for the prompt.
    package var operation: UserCheckOperation = .read
    /// The items as the prompt names them (`UserCheckItemName`), at most `UserCheckItemName.maximum`;
    /// `items.count` says how many there are in all.
    package var names: [UserCheckItemName] = []
    /// The items sealed under an application password whose key the request needs (derived in phase
    /// two from the request's password, which is asked for when the request brought none).
    package var boxes: [ApplicationBox] = []
    /// A new item is to be sealed under an application password the request did not bring.
    package var newBox = false

    /// A requirement that names no item: what `LAContext.evaluatePolicy` asks the user for
    /// (docs/ACCESS-CONTROL.md §7), checked like an item's and granted to no session.
    package static func evaluation(_ constraint: AccessConstraint, prompt: String?) -> UserCheckRequirement {
        UserCheckRequirement(serial: 0, items: [], constraints: [constraint], prompt: prompt)
    }
}

/// What a request wants to do with the items that need a check, as the prompt says it.
package enum UserCheckOperation: String, Sendable, Equatable {
    case read, change, sign, decrypt, exchange, export

    /// The use of a protected key: the key operation's own word.
    init(_ operation: KeyOperation) {
        switch operation {
        case .sign: self = .sign
        case .decrypt: self = .decrypt
        case .exchange: self = .exchange
        case .export: self = .export
        }
    }
}

/// An item as a prompt names it: its kind and its label, else what identifies it (service and account,
/// server and account). Caller-controlled text: the prompt sanitises and bounds it before showing it.
package struct UserCheckItemName: Sendable, Equatable {
    /// The prompt names at most this many items; the rest are counted.
    package static let maximum = 3
    package let itemClass: ItemClass
    package let name: String

    init(_ item: OpenItem) {
        itemClass = item.itemClass
        func text(_ key: String) -> String? {
            guard case .string(let value)? = item.attributes[key], !value.isEmpty else { return nil }
            return value
        }
        if let label = text(SecAttr.label) {
            name = label
        } else {
            let primary = text(item.itemClass == .internetPassword ? SecAttr.server : SecAttr.service)
            name = [primary, text(SecAttr.account)].compactMap { $0 }.joined(separator: " / ")
        }
    }
}

/// One request's user checks: made by the request layer for one request, given to each engine call
/// that request makes, and dropped with it, so a check that succeeded serves that request and no other
/// (phase two). The engine records what it needs (`pending`); the request layer grants it once the
/// user passed the check (`grant`), and the engine then lets exactly those items through, and only if
/// the checks that passed satisfy each item's constraint, which it evaluates itself.
package final class UserCheckSession: Sendable {
    private struct State {
        var serial: UInt64 = 0
        var pending: UserCheckRequirement?
        var granted: (items: Set<[UInt8]>, passed: Set<UserCheckKind>)?
        /// The checks an `LAContext` passed within its reuse window (`kSecUseAuthenticationContext`):
        /// they cover every item whose constraint they satisfy, as Apple's evaluated context does.
        var evaluated: Set<UserCheckKind>?
        /// The application password of this request (`LAContext.setCredential`, or asked for), never kept
        /// beyond it, and the keys derived from it, by item.
        var applicationPassword: SecretBytes?
        var applicationKeys: [[UInt8]: SecretBytes] = [:]
        /// Application-password derivations made for this request, over all its rounds.
        var derivations = 0
    }
    private let state = Locked(State())

    package init() {}

    /// What the engine's last errSecAuthNeeded asked for.
    package var pending: UserCheckRequirement? { state.withLock { $0.pending } }

    /// The request's application password, if it brought one or it was asked for.
    package var applicationPassword: SecretBytes? { state.withLock { $0.applicationPassword } }

    /// Sets the request's application password (from the request, or the prompt).
    package func setApplicationPassword(_ password: SecretBytes) {
        state.withLock { $0.applicationPassword = password }
    }

    /// The key of the application-password box of item `ref`, once phase two derived it.
    func applicationKey(for ref: [UInt8]) -> SecretBytes? {
        state.withLock { $0.applicationKeys[ref] }
    }

    /// Derives, with the request's application password, the key of every box `requirement` names
    /// (Argon2id each, one derivation at a time in the agent: never with the engine's mutex held).
    package func applicationKeys(for requirement: UserCheckRequirement) throws(SecError) -> [[UInt8]: SecretBytes] {
        guard !requirement.boxes.isEmpty else { return [:] }
        guard let password = applicationPassword else {
            throw SecError(SecStatus.interactionNotAllowed, "the item needs its application password")
        }
        // Each box has its own salt, so its own derivation (64 MiB, a fraction of a second, one at a time):
        // a bounded number per request, so that one query cannot hold the others' up for minutes.
        guard requirement.boxes.count <= ApplicationPassword.maximumBoxesPerRequest else {
            throw .param(
                "more than \(ApplicationPassword.maximumBoxesPerRequest) items sealed under an application "
                    + "password in one request: narrow the query")
        }
        // Counted over the request's rounds too: a repeat must not derive another 16.
        let admitted = state.withLock { state -> Bool in
            state.derivations += requirement.boxes.count
            return state.derivations <= ApplicationPassword.maximumBoxesPerRequest
        }
        guard admitted else {
            throw .param(
                "more than \(ApplicationPassword.maximumBoxesPerRequest) derivations of an application password "
                    + "in one request: narrow the query")
        }
        var keys: [[UInt8]: SecretBytes] = [:]
        for box in requirement.boxes where keys[box.item] == nil {
            keys[box.item] = try ApplicationPassword.derivingOneAtATime {
                () throws(SecError) -> SecretBytes in try ApplicationPassword.deriveKey(password, box.derivation)
            }
        }
        return keys
    }

    /// Records that the user passed `passed` for `requirement`, which must be the pending one (a stale or
    /// foreign requirement grants nothing), and the application keys derived for its boxes. Returns
    /// whether it was taken.
    @discardableResult
    package func grant(
        _ requirement: UserCheckRequirement, passed: Set<UserCheckKind>, applicationKeys: [[UInt8]: SecretBytes] = [:]
    ) -> Bool {
        state.withLock { state in
            guard state.pending == requirement else { return false }
            state.pending = nil
            state.applicationKeys.merge(applicationKeys) { $1 }
            var items = state.granted?.items ?? []
            var kinds = state.granted?.passed ?? []
            items.formUnion(requirement.items)
            kinds.formUnion(passed)
            state.granted = (items, kinds)
            return true
        }
    }

    /// Records the checks the request's authentication context passed within its reuse window
    /// (docs/ACCESS-CONTROL.md §7), before the request runs: they cover any item whose constraint they
    /// satisfy, which `covers` decides per item as for any grant. Only the agent's context registry,
    /// which binds a context to its process, gives them.
    package func grantEvaluation(_ passed: Set<UserCheckKind>) {
        state.withLock { state in state.evaluated = (state.evaluated ?? []).union(passed) }
    }

    /// Whether a grant of this session covers `ref` under `constraint`.
    func covers(_ ref: [UInt8], _ constraint: AccessConstraint) -> Bool {
        state.withLock { state in
            if let evaluated = state.evaluated, constraint.isSatisfied(by: evaluated) { return true }
            guard let granted = state.granted, granted.items.contains(ref) else { return false }
            return constraint.isSatisfied(by: granted.passed)
        }
    }

    /// Records a new requirement and returns the error that carries the request back to the agent.
    func require(
        items: [[UInt8]], constraints: [AccessConstraint], prompt: String?, operation: UserCheckOperation = .read,
        names: [UserCheckItemName] = [], boxes: [ApplicationBox] = [], newBox: Bool = false
    ) -> SecError {
        state.withLock { state in
            state.serial &+= 1
            state.pending = UserCheckRequirement(
                serial: state.serial, items: items, constraints: constraints, prompt: prompt, operation: operation,
                names: names, boxes: boxes, newBox: newBox)
        }
        return SecError(SecStatus.authNeeded, "a user check is needed")
    }
}

/// The engine's one decision about user presence (docs/ACCESS-CONTROL.md §3), made in `ItemRules` for
/// every item whose secret a request reads, changes or uses, after the item was opened (so a locked
/// class has already answered errSecInteractionNotAllowed).
struct PresenceGate {
    /// The request's session; nil for callers that cannot ask the user (the Secret Service, for now),
    /// for which a protected item is as with `kSecUseAuthenticationUIFail`.
    let session: UserCheckSession?

    /// The elements whose protected items may be used. `protectedItems` names, for each element, the
    /// items whose secret the request would read, change or use. `.skip` leaves the elements out,
    /// `.fail` refuses, `.allow` asks (errSecAuthNeeded) unless the session's grant covers them.
    func admit<Element>(
        _ elements: [Element], ui: AuthenticationUI, prompt: String?, operation: UserCheckOperation = .read,
        protectedItems: (Element) -> [OpenItem]
    ) throws(SecError) -> [Element] {
        var kept: [Element] = []
        var needed: [(ref: [UInt8], constraint: AccessConstraint)] = []
        var nameOf: [[UInt8]: UserCheckItemName] = [:]
        var boxes: [ApplicationBox] = []
        for element in elements {
            var uncovered: [(ref: [UInt8], constraint: AccessConstraint)] = []
            var unopened: [ApplicationBox] = []
            for item in protectedItems(element) {
                guard let control = try item.accessControl() else { continue }
                if let constraint = control.constraint, session?.covers(item.persistentRef, constraint) != true {
                    uncovered.append((item.persistentRef, constraint))
                    if ui == .allow { nameOf[item.persistentRef] = UserCheckItemName(item) }
                }
                if control.flags.contains(.applicationPassword), session?.applicationKey(for: item.persistentRef) == nil
                {
                    let box = try ItemSealer.openStoredSecret(item)
                    unopened.append(
                        ApplicationBox(
                            item: item.persistentRef, derivation: try ApplicationPassword.derivation(of: box)))
                }
            }
            if uncovered.isEmpty && unopened.isEmpty {
                kept.append(Self.withApplicationKeys(element, from: session))
                continue
            }
            // A password the request brought needs no UI: its keys are derived in phase two whatever
            // kSecUseAuthenticationUI says. Without one, asking for it is a prompt like any other.
            if uncovered.isEmpty, session?.applicationPassword != nil {
                boxes += unopened
                continue
            }
            switch ui {
            case .skip: continue
            case .fail:
                throw SecError(
                    SecStatus.interactionNotAllowed, "the item needs a user check (kSecUseAuthenticationUIFail)")
            case .allow:
                guard session != nil else {
                    throw SecError(
                        SecStatus.interactionNotAllowed, "the item needs a user check, which this caller cannot ask for"
                    )
                }
                needed += uncovered
                boxes += unopened
            }
        }
        guard let session, !needed.isEmpty || !boxes.isEmpty else { return kept }
        var refs: [[UInt8]] = []
        var constraints: [AccessConstraint] = []
        for (ref, constraint) in needed {
            if !refs.contains(ref) { refs.append(ref) }
            if !constraints.contains(constraint) { constraints.append(constraint) }
        }
        let names = refs.prefix(UserCheckItemName.maximum).compactMap { nameOf[$0] }
        throw session.require(
            items: refs, constraints: constraints, prompt: prompt, operation: operation, names: names, boxes: boxes)
    }

    /// `element` with the application keys the session holds for it (an item read by itself; the other
    /// elements, identities, never carry an application password: `ApplicationPassword.checkSupported`).
    private static func withApplicationKeys<Element>(_ element: Element, from session: UserCheckSession?) -> Element {
        guard var item = element as? OpenItem, let key = session?.applicationKey(for: item.persistentRef) else {
            return element
        }
        item.applicationKey = key
        return item as? Element ?? element
    }

    /// `admit` for items whose secret the request needs, each one of them.
    func admit(_ items: [OpenItem], ui: AuthenticationUI, prompt: String?, operation: UserCheckOperation = .read)
        throws(SecError) -> [OpenItem]
    {
        try admit(items, ui: ui, prompt: prompt, operation: operation) { [$0] }
    }
}

extension OpenItem {
    /// The item's `kSecAttrAccessControl`, sealed among its attributes; errSecDecode when it is malformed.
    func accessControl() throws(SecError) -> AccessControl? {
        guard let value = attributes[SecAttr.accessControl] else { return nil }
        guard case .data(let bytes) = value else {
            throw SecError(SecStatus.decode, "item row \(id) has a malformed access control")
        }
        do {
            return try AccessControl(decoding: bytes)
        } catch {
            throw SecError(SecStatus.decode, "item row \(id) has a malformed access control")
        }
    }
}
