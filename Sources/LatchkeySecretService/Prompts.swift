/// The prompts the service has handed out (`Unlock`, and `CreateCollection` while locked), until
/// each completes (docs/SECRET-SERVICE.md §4–5). Threading: the bus loop thread only.
final class PromptRegistry {
    /// What a prompt does once the keychain is unlocked.
    enum Action {
        /// `Unlock(objects)`: the result is the objects.
        case unlock([String])
        /// `CreateCollection` on a locked keychain: the result is the new collection.
        case createCollection(label: String, alias: String)
    }

    final class Prompt {
        let owner: String
        let action: Action
        /// Set while the prompter runs.
        var cancellation: PromptCancellation?

        init(owner: String, action: Action) {
            self.owner = owner
            self.action = action
        }
    }

    static let maxPerClient = 16
    static let maxTotal = 4096

    private var prompts: [UInt64: Prompt] = [:]
    private var next: UInt64 = 1

    /// A new prompt's path; nil when the client has too many.
    func add(owner: String, action: Action) -> String? {
        guard prompts.count < Self.maxTotal,
            prompts.values.filter({ $0.owner == owner }).count < Self.maxPerClient
        else { return nil }
        let n = next
        next += 1
        prompts[n] = Prompt(owner: owner, action: action)
        return ObjectPath.promptPath(n)
    }

    /// The prompt `n` if `caller` owns it.
    func prompt(_ n: UInt64, caller: String) -> Prompt? {
        guard let prompt = prompts[n], prompt.owner == caller else { return nil }
        return prompt
    }

    func exists(_ n: UInt64, caller: String) -> Bool { prompt(n, caller: caller) != nil }

    func remove(_ n: UInt64) -> Prompt? { prompts.removeValue(forKey: n) }

    /// Forgets the prompts of a connection that left the bus, stopping their prompters.
    func removeAll(owner: String) {
        for (n, prompt) in prompts where prompt.owner == owner {
            prompt.cancellation?.cancel()
            prompts[n] = nil
        }
    }
}
