import LatchkeyModel
import LatchkeySystem

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
    }
    private let state = Locked(State())

    package init() {}

    /// What the engine's last errSecAuthNeeded asked for.
    package var pending: UserCheckRequirement? { state.withLock { $0.pending } }

    /// Records that the user passed `passed` for `requirement`, which must be the pending one (a stale or
    /// foreign requirement grants nothing). Returns whether it was taken.
    @discardableResult
    package func grant(_ requirement: UserCheckRequirement, passed: Set<UserCheckKind>) -> Bool {
        state.withLock { state in
            guard state.pending == requirement else { return false }
            state.pending = nil
            var items = state.granted?.items ?? []
            var kinds = state.granted?.passed ?? []
            items.formUnion(requirement.items)
            kinds.formUnion(passed)
            state.granted = (items, kinds)
            return true
        }
    }

    /// Whether a grant of this session covers `ref` under `constraint`.
    func covers(_ ref: [UInt8], _ constraint: AccessConstraint) -> Bool {
        state.withLock { state in
            guard let granted = state.granted, granted.items.contains(ref) else { return false }
            return constraint.isSatisfied(by: granted.passed)
        }
    }

    /// Records a new requirement and returns the error that carries the request back to the agent.
    func require(
        items: [[UInt8]], constraints: [AccessConstraint], prompt: String?, operation: UserCheckOperation = .read,
        names: [UserCheckItemName] = []
    ) -> SecError {
        state.withLock { state in
            state.serial &+= 1
            state.pending = UserCheckRequirement(
                serial: state.serial, items: items, constraints: constraints, prompt: prompt, operation: operation,
                names: names)
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
        for element in elements {
            var uncovered: [(ref: [UInt8], constraint: AccessConstraint)] = []
            for item in protectedItems(element) {
                guard let constraint = try item.accessControl()?.constraint else { continue }
                if session?.covers(item.persistentRef, constraint) != true {
                    uncovered.append((item.persistentRef, constraint))
                    if ui == .allow { nameOf[item.persistentRef] = UserCheckItemName(item) }
                }
            }
            if uncovered.isEmpty {
                kept.append(element)
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
            }
        }
        guard let session, !needed.isEmpty else { return kept }
        var refs: [[UInt8]] = []
        var constraints: [AccessConstraint] = []
        for (ref, constraint) in needed {
            if !refs.contains(ref) { refs.append(ref) }
            if !constraints.contains(constraint) { constraints.append(constraint) }
        }
        let names = refs.prefix(UserCheckItemName.maximum).compactMap { nameOf[$0] }
        throw session.require(
            items: refs, constraints: constraints, prompt: prompt, operation: operation, names: names)
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
