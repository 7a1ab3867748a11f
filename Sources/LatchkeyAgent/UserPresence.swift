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
    /// The PAM service of the biometry flags; `/etc/pam.d/latchkey-biometry`
    /// (contrib/pam.d/latchkey-biometry). Run only when its file exists: without it Linux-PAM would run
    /// the `other` stack, commonly the password, which must never stand for biometry.
    package static let biometryService = "latchkey-biometry"
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
    /// The checks the `latchkey-biometry` stack stands for. PAM cannot tell which enrolment answered, so
    /// it stands for the current set too; and biometry is one way of user presence, as on Apple systems.
    static let biometryChecks: Set<UserCheckKind> = [.biometryAny, .biometryCurrentSet, .userPresence]

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
        /// The PAM services to run, in order; every one must pass.
        let services: [String]
        /// A question asked through the prompter instead of a PAM check: an application password's
        /// (docs/ACCESS-CONTROL.md §8) or a token's PIN (docs/TOKENS.md, "The PIN").
        let question: String?
        /// A confirmation asked instead (its OK button's label): a token's PIN pad, a key made on a token.
        let confirmation: String?
        /// Guarded by the monitor.
        var outcome: PAMUserCheck.Outcome?
        /// Guarded by the monitor: what the user answered to `question`, taken once by the asking thread.
        var answer: SecretBytes?
        /// Guarded by the monitor: the worker took the job.
        var running = false
        /// Guarded by the monitor: its client went away; no further transaction starts for it.
        var dismissed = false
        /// Guarded by the monitor: the conversation of the transaction running for it.
        var conversation: PinentryConversation?
        init(
            description: String, pid: Int32, services: [String] = [], question: String? = nil,
            confirmation: String? = nil
        ) {
            self.description = description
            self.pid = pid
            self.services = services
            self.question = question
            self.confirmation = confirmation
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

    /// How often a request waiting for its check looks whether its client is still connected.
    static let hangUpInterval = 0.25

    /// Asks the user for `requirement`: the checks that passed, or the request's error
    /// (errSecUserCanceled, errSecAuthFailed, errSecInteractionNotAllowed). `clientGone` says whether the
    /// asking client closed its connection: its check is then dismissed (taken out of the queue, or its
    /// prompt stopped, which ends the PAM transaction), and the next one goes on.
    func check(_ requirement: UserCheckRequirement, caller: Caller, clientGone: () -> Bool = { false })
        throws(SecError) -> Set<UserCheckKind>
    {
        let plan = try Self.plan(requirement.constraints, biometry: biometryConfigured())
        guard user != nil else { throw SecError(SecStatus.authFailed, "the agent's user has no name") }
        let job = Job(
            description: Self.description(requirement, caller: caller), pid: caller.pid, services: plan.services)
        try run(job, clientGone: clientGone)
        return plan.passed
    }

    /// Asks the user, through the prompter, for the application password of the items `requirement`
    /// names (docs/ACCESS-CONTROL.md §8), in the same queue as the checks. errSecUserCanceled when
    /// cancelled or not answered in time, errSecInteractionNotAllowed when nobody can be asked.
    func applicationPassword(_ requirement: UserCheckRequirement, caller: Caller, clientGone: () -> Bool = { false })
        throws(SecError) -> SecretBytes
    {
        let job = Job(
            description: Self.description(requirement, caller: caller, applicationPassword: true), pid: caller.pid,
            question: "Application password:")
        try run(job, clientGone: clientGone)
        guard let password = takeAnswer(job) else {
            throw SecError(SecStatus.userCanceled, "no application password was given")
        }
        return password
    }

    /// The answer the user gave to `job`'s question, taken once (the job keeps no copy).
    private func takeAnswer(_ job: Job) -> SecretBytes? {
        monitor.locked {
            defer { job.answer = nil }
            return job.answer
        }
    }

    /// Asks the user for a token's PIN through the prompter, in the same queue as the user checks (one
    /// prompt at a time): the PIN; nil once a confirmation (`.pinPad`, `.confirm`) was given; or
    /// errSecUserCanceled / errSecInteractionNotAllowed.
    func askPIN(_ request: TokenService.PINRequest) throws(SecError) -> SecretBytes? {
        let job: Job
        switch request.kind {
        case .pin:
            job = Job(
                description: Self.pinDescription(request), pid: request.caller.pid,
                question: "PIN for \(Self.printable(request.tokenLabel, limit: 64)):")
        case .pinPad:
            job = Job(description: Self.pinDescription(request), pid: request.caller.pid, confirmation: "Continue")
        case .confirm:
            job = Job(
                description: Self.pinDescription(request), pid: request.caller.pid,
                confirmation: request.purpose == .useKey ? "Allow" : "Make the key")
        }
        do {
            try run(job, clientGone: { false })
        } catch {
            throw error.status == SecStatus.authFailed
                ? SecError(SecStatus.interactionNotAllowed, "the PIN prompt could not be shown") : error
        }
        guard request.kind == .pin else { return nil }
        guard let pin = takeAnswer(job) else {
            throw SecError(SecStatus.interactionNotAllowed, "the prompter gave no PIN")
        }
        return pin
    }

    /// The PIN prompt's text: which program asks, for which key on which token, and its reason.
    static func pinDescription(_ request: TokenService.PINRequest) -> String {
        var program = request.caller.executable ?? "process \(request.caller.pid)"
        if let application = request.caller.accessGroups.first, application != Caller.defaultAccessGroup {
            program = "\(application) (\(program))"
        }
        let label = request.keyLabel.map { " \u{201C}\(printable($0, limit: 100))\u{201D}" }
        let action: String
        switch request.purpose {
        case .useKey: action = "use " + (label.map { "the key" + $0 } ?? "a key")
        case .makeKey(let kind): action = "make a new \(printable(kind, limit: 40)) key\(label ?? "")"
        }
        var text =
            "\(printable(program, limit: 300)) wants to \(action) on the token "
            + "\u{201C}\(printable(request.tokenLabel, limit: 64))\u{201D} (\(printable(request.tokenID, limit: 140)))."
        if let prompt = request.prompt, !prompt.isEmpty { text += "\n\n" + printable(prompt, limit: 500) }
        if request.kind == .pinPad { text += "\n\nContinue, then enter the PIN on the reader's PIN pad." }
        return text
    }

    /// Queues `job`, waits for its outcome (dismissing it if its client goes) and throws unless it passed.
    private func run(_ job: Job, clientGone: () -> Bool) throws(SecError) {
        let admitted = monitor.locked { () -> (queued: Bool, startWorker: Bool) in
            guard queue.count < Self.maximumWaiting,
                queue.filter({ $0.pid == job.pid }).count < Self.maximumWaitingPerProcess
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
        // `PAMUserCheck.maximumQuestions` of them; the worker always finishes the job. Meanwhile the
        // client's connection is watched, so a program that is gone does not keep its prompt up.
        while !monitor.wait(timeout: Self.hangUpInterval, until: { job.outcome != nil }) {
            guard clientGone() else { continue }
            dismiss(job)
            throw SecError(SecStatus.userCanceled, "the client closed its connection; its user check was dismissed")
        }
        switch monitor.locked({ job.outcome! }) {
        case .passed: return
        case .cancelled: throw SecError(SecStatus.userCanceled, "the user check was cancelled or timed out")
        case .noInteraction: throw SecError(SecStatus.interactionNotAllowed, "the user check could not be shown")
        case .failed: throw SecError(SecStatus.authFailed, "the user check failed")
        }
    }

    /// Dismisses `job`, whose client went away: a queued job leaves the queue; a running one has its
    /// prompter stopped, which fails the PAM conversation and so ends the transaction.
    private func dismiss(_ job: Job) {
        let conversation = monitor.locked { () -> PinentryConversation? in
            job.dismissed = true
            guard job.running else {
                queue.removeAll { $0 === job }
                job.outcome = .cancelled
                return nil
            }
            return job.conversation
        }
        conversation?.cancel()
        AgentLog.info("user check for pid \(job.pid) dismissed: its client closed the connection")
    }

    /// Runs the queued checks in order until none is left; one worker at a time.
    private func startWorker() {
        let started = startDetachedThread { [self] in
            while let job = monitor.locked({ () -> Job? in
                if queue.isEmpty { working = false }
                queue.first?.running = true
                return queue.first
            }) {
                var outcome = PAMUserCheck.Outcome.failed
                var answer: SecretBytes?
                if job.question != nil || job.confirmation != nil {
                    let conversation = PinentryConversation(prompter: prompter, description: job.description)
                    let dismissed = monitor.locked { () -> Bool in
                        job.conversation = conversation
                        return job.dismissed
                    }
                    if dismissed {
                        outcome = .cancelled
                    } else {
                        let said =
                            job.question.map { conversation.ask($0) } ?? conversation.confirm(ok: job.confirmation!)
                        switch said {
                        case .answer(let given):
                            answer = given
                            outcome = .passed
                        case .cancelled, .timedOut: outcome = .cancelled
                        case .failed: outcome = .noInteraction
                        }
                    }
                    monitor.locked { job.conversation = nil }
                    conversation.close()
                }
                for service in job.question != nil || job.confirmation != nil ? [] : job.services {
                    let conversation = PinentryConversation(prompter: prompter, description: job.description)
                    let dismissed = monitor.locked { () -> Bool in
                        job.conversation = conversation
                        return job.dismissed
                    }
                    if dismissed {
                        outcome = .cancelled
                        break
                    }
                    outcome = PAMUserCheck.run(
                        service: service, directory: directory, user: user ?? "", conversation: conversation)
                    monitor.locked { job.conversation = nil }
                    conversation.close()
                    // `.and`: both transactions must pass; the first that does not ends the check.
                    if outcome != .passed { break }
                }
                monitor.locked {
                    // A job whose client went away keeps no answer (a PIN or a password) it will never take.
                    job.answer = job.dismissed ? nil : answer
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

    /// Which stacks one check runs, and what passing them all proves: the password stack alone when it
    /// satisfies every constraint (`.userPresence`, `.devicePasscode`, an `.or` with either), else the
    /// biometry stack alone, else both (an `.and` of biometry and the password). A constraint neither can
    /// satisfy (a companion device), or biometry without its stack, fails as Apple's does when no
    /// biometry is enrolled: errSecAuthFailed, without asking.
    static func plan(_ constraints: [AccessConstraint], biometry: Bool) throws(SecError)
        -> (services: [String], passed: Set<UserCheckKind>)
    {
        func satisfied(_ passed: Set<UserCheckKind>) -> Bool { constraints.allSatisfy { $0.isSatisfied(by: passed) } }
        if satisfied(stackChecks) { return ([service], stackChecks) }
        guard biometry else {
            throw SecError(
                SecStatus.authFailed,
                "the item needs a check this system cannot make (no \(biometryService) PAM service, or a companion)")
        }
        if satisfied(biometryChecks) { return ([biometryService], biometryChecks) }
        let both = stackChecks.union(biometryChecks)
        if satisfied(both) { return ([biometryService, service], both) }
        throw SecError(SecStatus.authFailed, "the item needs a check this system cannot make (a companion device)")
    }

    /// Whether the `latchkey-biometry` service file exists (a regular file, through symbolic links as
    /// Linux-PAM opens it). Only root can change /etc/pam.d, and `LATCHKEY_PAM_DIR` only a root agent honours.
    private func biometryConfigured() -> Bool {
        var info = stat()
        let path = (directory ?? "/etc/pam.d") + "/" + Self.biometryService
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, info.st_size <= 65_536 else { return false }
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 65_536)
        let count = read(fd, &bytes, bytes.count)
        guard count >= 0 else { return false }
        return Self.hasOwnAuthLine(String(decoding: bytes[..<count], as: UTF8.self))
    }

    /// Whether a service file has an `auth` line of its own. Linux-PAM runs the `other` stack (often the
    /// password, sometimes pam_permit) for a service whose file has none, an empty or commented-out one
    /// too, and that must never stand for biometry; an `include` or `substack` could lead anywhere, so
    /// it does not count either.
    static func hasOwnAuthLine(_ text: String) -> Bool {
        text.split(whereSeparator: \.isNewline).contains { line in
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let type = words.first, type == "auth" || type == "-auth", words.count >= 3 else { return false }
            let control = words[1]
            // `[value=action ...]` jumps within the stack; it cannot include another.
            return control.hasPrefix("[") || (control != "include" && control != "substack")
        }
    }

    /// The prompt's text: which program asks, what it wants to do with which items (or that it needs
    /// their application password), and its reason (`kSecUseOperationPrompt`). Every part the caller
    /// controls is sanitised and bounded.
    static func description(_ requirement: UserCheckRequirement, caller: Caller, applicationPassword: Bool = false)
        -> String
    {
        var program = caller.executable ?? "process \(caller.pid)"
        if let application = caller.accessGroups.first, application != Caller.defaultAccessGroup {
            program = "\(application) (\(program))"
        }
        var text =
            applicationPassword
            ? (requirement.items.isEmpty
                ? "\(printable(program, limit: 300)) needs the application password of a keychain item."
                : "\(printable(program, limit: 300)) needs the application password to \(action(requirement)).")
            : "\(printable(program, limit: 300)) wants to \(action(requirement))."
        if let prompt = requirement.prompt, !prompt.isEmpty { text += "\n\n" + printable(prompt, limit: 500) }
        return text
    }

    /// "read the password “Mail”", "sign with the key “Signing key”", "change the passwords “a”, “b” and 2
    /// more": the operation and the items it needs a check for.
    static func action(_ requirement: UserCheckRequirement) -> String {
        let verb =
            switch requirement.operation {
            case .read: "read"
            case .change: "change"
            case .sign: "sign with"
            case .decrypt: "decrypt with"
            case .exchange: "exchange keys with"
            case .export: "export"
            }
        let total = max(requirement.items.count, requirement.names.count)
        guard let first = requirement.names.first else {
            return "\(verb) \(total == 1 ? "a protected keychain item" : "\(total) protected keychain items")"
        }
        let kinds = Set(requirement.names.map(\.itemClass))
        var noun =
            switch kinds.count == 1 ? first.itemClass : nil {
            case .genericPassword?, .internetPassword?: "password"
            case .key?: "key"
            case .certificate?: "certificate"
            default: "item"
            }
        if total > 1 { noun += "s" }
        let names = requirement.names.map { name in
            // Its own quotation marks would let a name seem to end early and the rest read as ours.
            let shown = printable(name.name, limit: 120).map { "\u{201C}\u{201D}\u{201E}\"«»".contains($0) ? "'" : $0 }
                .reduce(into: "") { $0.append($1) }
            return "\u{201C}\(shown.isEmpty ? "(no name)" : shown)\u{201D}"
        }
        var list = names.joined(separator: ", ")
        if total > names.count { list += " and \(total - names.count) more" }
        return "\(verb) the \(noun) \(list)"
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
