import LatchkeyDBus
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets
import LatchkeySystem

/// `org.freedesktop.Secret.Prompt` at /org/freedesktop/secrets/prompt/N (docs/SECRET-SERVICE.md §4–5):
/// there only for the connection whose call made it.
final class PromptObject: SecretServiceObject {
    let service: SecretService
    let bus: Bus
    let n: UInt64
    let caller: String
    private var resolved: PromptRegistry.Prompt?

    init(service: SecretService, bus: Bus, n: UInt64, caller: String) {
        self.service = service
        self.bus = bus
        self.n = n
        self.caller = caller
    }

    static let interfaces = [
        BusInterface<PromptObject>(
            SS.Interface.prompt,
            methods: [
                BusMethod("Prompt", in: [("window-id", "s")]) { try $0.prompt($1) },
                BusMethod("Dismiss") { try $0.dismiss($1) },
            ],
            signals: [
                BusSignal("Completed", [("dismissed", "b"), ("result", "v")])
            ])
    ]

    private func resolve() throws -> PromptRegistry.Prompt {
        if let resolved { return resolved }
        guard let prompt = prompts.prompt(n, caller: caller) else {
            throw SecretServiceErrors.noSuchObject("no such prompt for this connection")
        }
        resolved = prompt
        return prompt
    }

    func checkExists() throws { _ = try resolve() }

    func prompt(_ call: BusMethodCall) throws {
        let prompt = try resolve()
        try call.reply()
        guard prompt.cancellation == nil else { return }  // already asking
        let n = n, service = service
        if !engine.lockState().collectionsLocked {
            // The keychain is unlocked: what is left are items whose access control needs the user.
            if try startUserCheck(prompt, call) { return }
            service.finish(n, .accepted, bus)  // unlocked meanwhile (a login, `latchkey unlock`)
            return
        }
        let cancellation = PromptCancellation()
        prompt.cancellation = cancellation
        // The caller's name comes from /proc and can be chosen by the caller: say so, and keep it
        // well inside an Assuan line (about 1,000 bytes).
        let caller = String(service.describeCaller(call.sender, bus).prefix(300))
        let description =
            "A program identifying as \(caller) wants to unlock your keychain. "
            + "Enter the keychain password to allow it."
        let prompter = service.prompter, keychain = service.keychain
        let connection = service.connection, log = service.log
        // The prompter talks to the bus the service is on (pinentry-gnome3 needs it).
        let busAddress: String? = if case .address(let address) = connection.endpoint { address } else { nil }
        let started = startDetachedThread {
            let outcome = prompter.run(
                description: description, cancellation: cancellation,
                busAddress: busAddress
            ) { password in
                do {
                    try keychain.unlock(password: password)
                    return true
                } catch let error as SecError {
                    log.info("Secret Service: unlock prompt: \(error.detail ?? "wrong password")")
                    return false
                } catch {
                    return false
                }
            }
            connection.perform { bus in service.finish(n, outcome, bus) }
        }
        if !started { service.finish(n, .failed("cannot start a thread for the prompt"), bus) }
    }

    /// Runs the user check of the items this `Unlock` names whose access control needs the user present
    /// (docs/SECRET-SERVICE.md §4c), on a thread of its own; false when there is none. On success they are
    /// unlocked for the prompt's owner for the reuse window.
    private func startUserCheck(_ prompt: PromptRegistry.Prompt, _ call: BusMethodCall) throws -> Bool {
        guard case .unlock(let objects) = prompt.action else { return false }
        let ids = objects.compactMap { path -> [UInt8]? in
            if case .item(_, let id)? = ObjectPath(path) { return id }
            return nil
        }
        let owner = prompt.owner, n = n, service = service
        let found = try service.serving(owner, bus) { () throws -> (UserCheckRequirement, Caller)? in
            guard let requirement = try service.engine.userCheckRequirement(for: ids) else { return nil }
            return (requirement, service.engine.caller)
        }
        guard let (requirement, caller) = found else { return false }
        let cancellation = PromptCancellation()
        prompt.cancellation = cancellation
        let policy = service.policy, connection = service.connection, log = service.log
        // Taken before the check: a lock while the user is asked ends what the check grants.
        let locks = service.keychain.lockCount()
        let started = startDetachedThread {
            let outcome: PinentryPrompter.Outcome
            do throws(SecError) {
                let passed = try policy.checkUserPresence(requirement, for: caller) { cancellation.isCancelled }
                outcome = .accepted
                connection.perform { bus in
                    // Locked while the user was asked: the grant would cover nothing; say so, not "unlocked".
                    guard service.keychain.lockCount() == locks else {
                        service.finish(n, .cancelled, bus)
                        return
                    }
                    guard service.userChecks.grant(requirement.items, passed: passed, to: owner, lockCount: locks)
                    else {
                        service.finish(n, .failed("the client holds too many unlocked items"), bus)
                        return
                    }
                    let paths = objects.filter { path in
                        if case .item(_, let id)? = ObjectPath(path) { return requirement.items.contains(id) }
                        return false
                    }
                    service.userCheckGranted(paths, to: owner, bus)
                    service.finish(n, outcome, bus)
                }
                return
            } catch {
                log.info("Secret Service: user check: \(error.detail ?? "status \(error.status)")")
                outcome = error.status == SecStatus.authFailed ? .rejected : .cancelled
            }
            connection.perform { bus in service.finish(n, outcome, bus) }
        }
        if !started { service.finish(n, .failed("cannot start a thread for the prompt"), bus) }
        return true
    }

    func dismiss(_ call: BusMethodCall) throws {
        let prompt = try resolve()
        try call.reply()
        if let cancellation = prompt.cancellation {
            cancellation.cancel()  // the prompt's thread reports it
        } else {
            service.finish(n, .cancelled, bus)
        }
    }
}

/// Completing prompts, from a prompt's thread or a `Dismiss`.
extension SecretService {
    /// Completes prompt `n` (if it still exists) with what the prompter gave, and announces it.
    func finish(_ n: UInt64, _ outcome: PinentryPrompter.Outcome, _ bus: Bus) {
        guard let prompt = prompts.remove(n) else { return }
        let path = ObjectPath.promptPath(n)
        var dismissed = false
        var result: BusValue
        switch prompt.action {
        case .unlock: result = Arguments.objectPathList([])
        case .createCollection: result = .objectPath(SS.noObject)
        }
        switch outcome {
        case .accepted:
            // For the client that made the prompt, as its call would have been.
            serving(prompt.owner, bus) {
                switch prompt.action {
                case .unlock(let objects):
                    result = Arguments.objectPathList(objects.flatMap { unlockedPaths(for: $0, caller: prompt.owner) })
                case .createCollection(let label, let alias):
                    do {
                        result = .objectPath(try createCollection(label: label, alias: alias, bus))
                    } catch {
                        log.warning(
                            "Secret Service: creating a collection after unlocking failed: \(SecretServiceErrors.map(error))"
                        )
                    }
                }
            }
            log.info("Secret Service: unlocked through a prompt")
        case .rejected:
            log.info("Secret Service: unlock prompt: \(PinentryPrompter.attempts) wrong passwords; nothing unlocked")
        case .cancelled:
            dismissed = true
        case .failed(let why):
            dismissed = true
            log.warning("Secret Service: the prompter failed: \(why)")
        }
        emit(bus, path, SS.Interface.prompt, "Completed", [.boolean(dismissed), .variant(result)])
        checkLockState(bus)
    }
}
