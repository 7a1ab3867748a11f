import LatchkeyDesktop
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets

/// `org.freedesktop.Secret.Prompt` at /org/freedesktop/secrets/prompt/N (docs/SECRET-SERVICE.md §4–5).
extension SecretService {
    func handlePrompt(_ call: BusMessage, _ n: UInt64, _ member: String, _ interface: String?, _ bus: Bus) throws
        -> Bus.Dispatch {
        let sender = call.sender ?? ""
        guard let prompt = prompts.prompt(n, caller: sender) else {
            throw SecretServiceErrors.noSuchObject("no such prompt for this connection")
        }
        guard Self.addressed(interface, SS.Interface.prompt) else { throw Self.unknownMethod(interface, member) }
        switch member {
        case "Prompt":
            _ = try Arguments.read(call, "s")
            try call.reply()
            guard prompt.cancellation == nil else { return .handled }  // already asking
            if !engine.lockState().collectionsLocked {
                finish(n, .accepted, bus)  // unlocked meanwhile (a login, `latchkey unlock`)
                return .handled
            }
            let cancellation = PromptCancellation()
            prompt.cancellation = cancellation
            // The caller's name comes from /proc and can be chosen by the caller: say so, and keep it
            // well inside an Assuan line (about 1,000 bytes).
            let caller = String(describeCaller(sender, bus).prefix(300))
            let description = "A program identifying as \(caller) wants to unlock your keychain. "
                + "Enter the keychain password to allow it."
            let prompter = prompter, keychain = keychain, connection = connection, log = log
            // The prompter talks to the bus the service is on (pinentry-gnome3 needs it).
            let busAddress: String? = if case .address(let address) = connection.endpoint { address } else { nil }
            let started = startDetachedThread { [self] in
                let outcome = prompter.run(description: description, cancellation: cancellation,
                                           busAddress: busAddress) { password in
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
                connection.perform { bus in self.finish(n, outcome, bus) }
            }
            if !started { finish(n, .failed("cannot start a thread for the prompt"), bus) }

        case "Dismiss":
            _ = try Arguments.read(call, "")
            try call.reply()
            if let cancellation = prompt.cancellation {
                cancellation.cancel()  // the prompt's thread reports it
            } else {
                finish(n, .cancelled, bus)
            }

        default:
            throw Self.unknownMethod(interface, member)
        }
        return .handled
    }

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
            switch prompt.action {
            case .unlock(let objects):
                result = Arguments.objectPathList(objects.filter { (try? lockedState(of: $0)) == false })
            case .createCollection(let label, let alias):
                do {
                    result = .objectPath(try createCollection(label: label, alias: alias, bus))
                } catch {
                    log.warning("Secret Service: creating a collection after unlocking failed: \(SecretServiceErrors.map(error))")
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
