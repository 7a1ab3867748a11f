import LatchkeyEngine
import LatchkeyModel
import LatchkeySecretService
import LatchkeySecrets
import LatchkeySystem
import LatchkeyTokens

#if canImport(Glibc)
    import Glibc
#endif

/// How the agent asks the user (docs/ACCESS-CONTROL.md §4): a PAM transaction for its own user in the
/// service `latchkey`, whose questions go to the pinentry prompter. Checks run one at a time, in the
/// order they were asked for, on a thread of their own; a request waiting for one holds only its own
/// connection's thread, never the keychain's mutex, so other callers' requests go on meanwhile.
package final class UserPresence: Sendable {
    /// The PAM service; `/etc/pam.d/latchkey` (contrib/pam.d/latchkey).
    package static let service = "latchkey"
    /// Names a directory of PAM service files in place of /etc/pam.d: honoured only by an agent whose
    /// effective uid is root (tests), never by a user's agent, whose environment any program of the user
    /// sets and which must not let it choose a permissive stack.
    package static let directoryVariable = "LATCHKEY_PAM_DIR"
    /// Seconds the prompter has for each answer (1 to 300; the prompter's own default otherwise).
    /// Anyone may shorten it; it cannot weaken a check.
    package static let timeoutVariable = "LATCHKEY_PRESENCE_TIMEOUT"
    /// Checks waiting at once; more are refused (errSecInteractionNotAllowed) rather than queued without end.
    static let maximumWaiting = 16
    /// Checks one process may have waiting at once: one program cannot fill the queue for everyone.
    static let maximumWaitingPerProcess = 2

    /// The checks the `latchkey` stack stands for: the user's own authentication, password or
    /// whatever the administrator put in front of pam_unix.
    static let stackChecks: Set<UserCheckKind> = [.userPresence, .devicePasscode]

    private let prompter: PinentryPrompter
    private let directory: String?
    private let user: String?
    private let monitor = Monitor()
    /// Guarded by `monitor`: the checks not yet finished, the first one running.
    nonisolated(unsafe) private var queue: [Job] = []
    /// Guarded by `monitor`: whether the worker thread runs (it stops once the queue is empty).
    nonisolated(unsafe) private var working = false

    private final class Job: @unchecked Sendable {
        let description: String
        /// The asking process (`maximumWaitingPerProcess`).
        let pid: Int32
        /// Guarded by the monitor.
        var outcome: PAMUserCheck.Outcome?
        /// A token's PIN is asked for instead of a PAM check: the question (docs/TOKENS.md, "The PIN").
        let pinQuestion: String?
        /// Guarded by the monitor: the PIN the user gave, taken by the asking thread.
        var pin: SecretBytes?
        init(description: String, pid: Int32, pinQuestion: String? = nil) {
            self.description = description
            self.pid = pid
            self.pinQuestion = pinQuestion
        }
    }

    package init(prompter: PinentryPrompter, directory: String? = UserPresence.configuredDirectory()) {
        let timeout = Environment.value(Self.timeoutVariable).flatMap(Int.init).flatMap {
            (1...300).contains($0) ? $0 : nil
        }
        self.prompter = timeout.map { PinentryPrompter(command: prompter.command, timeoutSeconds: $0) } ?? prompter
        self.directory = directory
        self.user = getpwuid(geteuid()).flatMap { $0.pointee.pw_name.map { String(cString: $0) } }
        if let directory { AgentLog.info("user checks use the PAM service files in \(directory)") }
    }

    /// The directory `LATCHKEY_PAM_DIR` names (an absolute path) for an agent running as root; nil
    /// (/etc/pam.d) otherwise.
    package static func configuredDirectory(euid: uid_t = geteuid()) -> String? {
        guard let value = Environment.value(directoryVariable), !value.isEmpty else { return nil }
        guard euid == 0, value.hasPrefix("/") else {
            AgentLog.warning("\(directoryVariable) is ignored: only an agent running as root honours it (tests)")
            return nil
        }
        return value
    }

    /// Asks the user for `requirement`: the checks that passed, or the request's error
    /// (errSecUserCanceled, errSecAuthFailed, errSecInteractionNotAllowed).
    func check(_ requirement: UserCheckRequirement, caller: Caller) throws(SecError) -> Set<UserCheckKind> {
        // Biometry has no stack of its own yet, and a companion device none at all: such a constraint
        // fails as Apple's does when no biometry is enrolled.
        for constraint in requirement.constraints where !constraint.isSatisfied(by: Self.stackChecks) {
            throw SecError(SecStatus.authFailed, "the item needs a check this system cannot make (biometry, companion)")
        }
        guard user != nil else { throw SecError(SecStatus.authFailed, "the agent's user has no name") }
        let job = Job(description: Self.description(requirement, caller: caller), pid: caller.pid)
        switch try wait(for: job, caller: caller) {
        case .passed: return Self.stackChecks
        case .cancelled: throw SecError(SecStatus.userCanceled, "the user check was cancelled or timed out")
        case .noInteraction: throw SecError(SecStatus.interactionNotAllowed, "the user check could not be shown")
        case .failed: throw SecError(SecStatus.authFailed, "the user check failed")
        }
    }

    /// Asks the user for a token's PIN through the prompter, in the same queue as the user checks (one
    /// prompt at a time): the PIN, or errSecUserCanceled / errSecInteractionNotAllowed.
    func askPIN(_ request: TokenService.PINRequest) throws(SecError) -> SecretBytes {
        let job = Job(
            description: Self.pinDescription(request), pid: request.caller.pid,
            pinQuestion: "PIN for \(Self.printable(request.tokenLabel, limit: 64)):")
        switch try wait(for: job, caller: request.caller) {
        case .passed:
            guard let pin = monitor.locked({ job.pin }) else {
                throw SecError(SecStatus.interactionNotAllowed, "the prompter gave no PIN")
            }
            monitor.locked { job.pin = nil }
            return pin
        case .cancelled: throw SecError(SecStatus.userCanceled, "the PIN entry was cancelled or timed out")
        case .noInteraction, .failed:
            throw SecError(SecStatus.interactionNotAllowed, "the PIN prompt could not be shown")
        }
    }

    /// The PIN prompt's text: which program asks, for which key on which token, and its reason.
    static func pinDescription(_ request: TokenService.PINRequest) -> String {
        var program = request.caller.executable ?? "process \(request.caller.pid)"
        if let application = request.caller.accessGroups.first, application != Caller.defaultAccessGroup {
            program = "\(application) (\(program))"
        }
        let key = request.keyLabel.map { "the key \u{201C}\(printable($0, limit: 100))\u{201D}" } ?? "a key"
        var text =
            "\(printable(program, limit: 300)) wants to use \(key) on the token "
            + "\u{201C}\(printable(request.tokenLabel, limit: 64))\u{201D} (\(printable(request.tokenID, limit: 140)))."
        if let prompt = request.prompt, !prompt.isEmpty { text += "\n\n" + printable(prompt, limit: 500) }
        return text
    }

    /// Queues `job` and waits for its outcome (bounded: each of the prompter's answers has its timeout).
    private func wait(for job: Job, caller: Caller) throws(SecError) -> PAMUserCheck.Outcome {
        let admitted = monitor.locked { () -> (queued: Bool, startWorker: Bool) in
            guard queue.count < Self.maximumWaiting,
                queue.filter({ $0.pid == caller.pid }).count < Self.maximumWaitingPerProcess
            else { return (false, false) }
            queue.append(job)
            defer { working = true }
            return (true, !working)
        }
        guard admitted.queued else {
            throw SecError(SecStatus.interactionNotAllowed, "too many user checks are waiting")
        }
        if admitted.startWorker { startWorker() }
        // Bounded: each of the prompter's answers has its timeout, and the stack at most
        // `PAMUserCheck.maximumQuestions` of them; the worker always finishes the job.
        monitor.wait { job.outcome != nil }
        return monitor.locked { job.outcome! }
    }

    /// Runs the queued checks in order until none is left; one worker at a time.
    private func startWorker() {
        let started = startDetachedThread { [self] in
            while let job = monitor.locked({ () -> Job? in
                if queue.isEmpty { working = false }
                return queue.first
            }) {
                let conversation = PinentryConversation(prompter: prompter, description: job.description)
                var pin: SecretBytes?
                let outcome: PAMUserCheck.Outcome
                if let question = job.pinQuestion {
                    switch conversation.ask(question) {
                    case .answer(let answer):
                        pin = answer
                        outcome = .passed
                    case .cancelled, .timedOut: outcome = .cancelled
                    case .failed: outcome = .noInteraction
                    }
                } else {
                    outcome = PAMUserCheck.run(
                        service: Self.service, directory: directory, user: user ?? "", conversation: conversation)
                }
                conversation.close()
                monitor.locked {
                    job.pin = pin
                    job.outcome = outcome
                    queue.removeFirst()
                }
                monitor.broadcast()
            }
        }
        if !started {
            monitor.locked {
                for job in queue { job.outcome = .noInteraction }
                queue.removeAll()
                working = false
            }
            monitor.broadcast()
        }
    }

    /// The prompt's text: which program asks, and its reason (`kSecUseOperationPrompt`).
    static func description(_ requirement: UserCheckRequirement, caller: Caller) -> String {
        var program = caller.executable ?? "process \(caller.pid)"
        if let application = caller.accessGroups.first, application != Caller.defaultAccessGroup {
            program = "\(application) (\(program))"
        }
        var text = "\(printable(program, limit: 300)) wants to use a protected keychain item."
        if let prompt = requirement.prompt, !prompt.isEmpty { text += "\n\n" + printable(prompt, limit: 500) }
        return text
    }

    /// Caller-given text without what could make it look like something else: controls (C0 and C1),
    /// format characters (bidirectional overrides, zero-width ones), line and paragraph separators;
    /// and bounded.
    static func printable(_ text: String, limit: Int) -> String {
        let shown = text.unicodeScalars.filter { scalar in
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned:
                false
            default: true
            }
        }
        return String(String.UnicodeScalarView(shown).prefix(limit))
    }
}
