import Dispatch
import Foundation
import LatchkeyModel
import LatchkeyWire

/// CryptoTokenKit's `TKTokenWatcher`: the ids of the tokens present (smart cards and other PKCS#11
/// tokens the agent reads, docs/TOKENS.md), and handlers called when one is inserted or removed.
///
/// A token is seen through its items (`kSecAttrTokenID` of the items of `kSecAttrAccessGroupToken`), so
/// a token whose objects are all hidden until its PIN is given, and that has no certificate or public
/// key, is not listed. Handlers run on a private serial queue; the watcher looks once a second while a
/// handler is set (the agent's own watcher looks at the tokens once a second too).
public final class TKTokenWatcher: @unchecked Sendable {
    private let queue = DispatchQueue(label: "latchkey.TKTokenWatcher")
    /// Touched on `queue` only.
    private var insertion: (@Sendable (String) -> Void)?
    private var removals: [String: [@Sendable (String) -> Void]] = [:]
    private var known: Set<String> = []
    private var timer: DispatchSourceTimer?

    /// A watcher; it looks for changes only once a handler is set.
    public init() {}

    deinit { timer?.cancel() }

    /// The ids of the tokens present now, sorted.
    public var tokenIDs: [String] { Self.presentTokenIDs().sorted() }

    /// Calls `insertionHandler` with the id of every token inserted from now on, and at once (on the
    /// watcher's queue) with those present, as CryptoTokenKit does.
    public func setInsertionHandler(_ insertionHandler: @escaping @Sendable (String) -> Void) {
        queue.async { [self] in
            insertion = insertionHandler
            let present = Self.presentTokenIDs()
            known = present
            for id in present.sorted() { insertionHandler(id) }
            startTimer()
        }
    }

    /// Calls `removalHandler` once, when the token `tokenID` is removed (at once if it is not present).
    public func addRemovalHandler(_ removalHandler: @escaping @Sendable (String) -> Void, forTokenID tokenID: String) {
        queue.async { [self] in
            guard Self.presentTokenIDs().contains(tokenID) else {
                removalHandler(tokenID)
                return
            }
            known.insert(tokenID)
            removals[tokenID, default: []].append(removalHandler)
            startTimer()
        }
    }

    private func startTimer() {
        guard timer == nil else { return }
        let made = DispatchSource.makeTimerSource(queue: queue)
        made.schedule(deadline: .now() + 1, repeating: 1)
        made.setEventHandler { [weak self] in self?.look() }
        made.resume()
        timer = made
    }

    /// Compares the tokens present with those seen last (on `queue`). A look asks the running agent
    /// only: a watcher that started an agent whenever none ran would bring one back after every logout
    /// (and into whatever runtime directory the process names then); with none running, nothing is
    /// known, and nothing changes.
    private func look() {
        guard let present = Self.presentTokenIDs(mayStartAgent: false) else { return }
        for id in known.subtracting(present).sorted() {
            for handler in removals.removeValue(forKey: id) ?? [] { handler(id) }
        }
        for id in present.subtracting(known).sorted() { insertion?(id) }
        known = present
    }

    /// The distinct token ids of the token group's certificates and keys.
    static func presentTokenIDs() -> Set<String> {
        presentTokenIDs(mayStartAgent: true) ?? []
    }

    /// The same, from the running agent only when `mayStartAgent` is false: nil when none runs or it
    /// does not answer.
    static func presentTokenIDs(mayStartAgent: Bool) -> Set<String>? {
        var ids: Set<String> = []
        for itemClass in [kSecClassCertificate, kSecClassKey] {
            let query: [CFString: Any] = [
                kSecClass: itemClass, kSecAttrAccessGroup: kSecAttrAccessGroupToken, kSecMatchLimit: kSecMatchLimitAll,
                kSecReturnAttributes: true,
            ]
            guard let dictionary = try? ValueBridge.dictionary(query as CFDictionary) else { return nil }
            let response =
                mayStartAgent
                ? AgentClient.shared.send(.copyMatching(dictionary))
                : AgentClient.shared.sendToRunningAgent(.copyMatching(dictionary))
            if response.status == SecStatus.itemNotFound { continue }
            guard response.status == SecStatus.success, case .array(let items)? = response.value else {
                return mayStartAgent ? ids : nil
            }
            for case .dictionary(let item) in items {
                if case .string(let id)? = item[SecAttr.tokenID] { ids.insert(id) }
            }
        }
        return ids
    }
}
