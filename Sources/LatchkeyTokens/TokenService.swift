import CP11Kit
import LatchkeyEngine
import LatchkeyModel
import LatchkeySecrets
import LatchkeySystem
import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// The agent's tokens (docs/TOKENS.md): loads the PKCS#11 modules, holds their sessions, watches for
/// tokens coming and going, and answers the engine (`TokenSource`): the items of the tokens present, and
/// operations with their keys. Every module call runs on that module's own thread (`ModuleWorker`), and
/// every wait for one is bounded, so a slow or hung token never holds a request thread for ever, nor the
/// engine's mutex at all (`items` reads a snapshot).
package final class TokenService: TokenSource, @unchecked Sendable {
    /// What a PIN prompt shows and for whom.
    package struct PINRequest: Sendable {
        /// What the user is asked for.
        package enum Kind: Sendable, Equatable {
            /// The PIN, typed into the prompter.
            case pin
            /// A confirmation that the program may go on, before the token's own PIN pad asks for the
            /// PIN: the pad cannot say which program asks.
            case pinPad
            /// A confirmation alone: the token is logged in already, and the program wants to write to it.
            case confirm
        }
        /// Why the token is used.
        package enum Purpose: Sendable, Equatable {
            /// A key operation with the key `keyLabel` names.
            case useKey
            /// A new key pair, described (e.g. "EC P-256"), to be made on the token.
            case makeKey(String)
        }
        package var caller: Caller
        package var tokenID: String
        package var tokenLabel: String
        package var keyLabel: String?
        /// `kSecUseOperationPrompt`.
        package var prompt: String?
        package var kind: Kind
        package var purpose: Purpose

        package init(
            caller: Caller, tokenID: String, tokenLabel: String, keyLabel: String?, prompt: String?,
            kind: Kind = .pin, purpose: Purpose = .useKey
        ) {
            self.caller = caller
            self.tokenID = tokenID
            self.tokenLabel = tokenLabel
            self.keyLabel = keyLabel
            self.prompt = prompt
            self.kind = kind
            self.purpose = purpose
        }
    }
    /// Asks the user for a token's PIN (`.pin`: the PIN) or for a confirmation (nil once confirmed);
    /// errSecUserCanceled / errSecInteractionNotAllowed otherwise.
    package typealias PINPrompt = @Sendable (PINRequest) throws(SecError) -> SecretBytes?

    /// How long a module may take to initialise, and a scan or a login; an operation waits `operationTimeout`.
    static let callTimeout: Duration = .seconds(10)
    static let operationTimeout: Duration = .seconds(30)

    struct LoadedModule: Sendable {
        let module: PKCS11Module
        let worker: ModuleWorker
    }

    /// A present token: what the last scan saw, and the session the agent holds on it.
    struct PresentToken: Sendable {
        var view: TokenView
        var module: Int
        var session: CK_SESSION_HANDLE
    }

    struct State {
        var modules: [LoadedModule] = []
        /// Modules whose `C_Initialize` succeeded, by index.
        var ready: Set<Int> = []
        /// Modules with a scan queued or running.
        var scanning: Set<Int> = []
        var tokens: [String: PresentToken] = [:]
        /// Modules whose thread was found stuck in a call (logged once each).
        var stuck: Set<Int> = []
        /// Tokens (by id) where a program's PIN was wrong since the last good login: no program's PIN is
        /// tried there until the user logs in, whatever flags the module reports. Kept across a removal,
        /// as the card keeps its count.
        var programPINFailed: Set<String> = []
        /// Modules with a slot-event thread waiting (`TokenService+Events`): polled slowly besides.
        var eventDriven: Set<Int> = []
        /// Modules with a slot event since their queued or running look was queued: one more look follows
        /// a running one; a queued one, when it starts, counts as the event's.
        var lookAgain: Set<Int> = []
        /// Modules whose queued look was asked for by a slot event (the logs say so).
        var eventLook: Set<Int> = []
        /// When each module's last look was queued.
        var lastLook: [Int: ContinuousClock.Instant] = [:]
    }

    let configuration: TokenConfiguration
    let askPIN: PINPrompt?
    let log: Logger
    let monitor = Monitor()
    /// Guarded by `monitor`.
    nonisolated(unsafe) var state = State()

    package init(configuration: TokenConfiguration, askPIN: PINPrompt?, log: Logger) {
        self.configuration = configuration
        self.askPIN = askPIN
        self.log = log
    }

    /// Loads the modules and starts watching, on a thread of its own: the agent serves meanwhile.
    package func start() {
        let started = startDetachedThread { [self] in
            loadModules()
            watch()
        }
        if !started { log.error("tokens: no thread for the token watcher; tokens are not shown") }
    }

    // MARK: - TokenSource

    package func items() -> [TokenItem] {
        monitor.locked { state.tokens.keys.sorted().flatMap { state.tokens[$0]!.view.items } }
    }

    package func keychainLocked() {
        // The PIN state goes with the keychain's: every token session is logged out.
        let sessions = monitor.locked { state.tokens.values.map { ($0.module, $0.session) } }
        for (index, session) in sessions {
            guard let loaded = module(index) else { continue }
            // Never dropped, however full the module's queue is (ModuleWorker.logout).
            loaded.worker.logout(session: UInt(session)) { loaded.module.logout(session) }
        }
    }

    // MARK: - State

    func module(_ index: Int) -> LoadedModule? {
        monitor.locked { state.modules.indices.contains(index) ? state.modules[index] : nil }
    }

    /// The present token that has the private key item `ref`, and the key's object.
    func token(holding ref: [UInt8]) -> (PresentToken, TokenView.KeyObject)? {
        monitor.locked {
            for token in state.tokens.values {
                if let key = token.view.keys[ref] { return (token, key) }
            }
            return nil
        }
    }

    /// Whether a program's PIN must not be tried on the token `id` (see `State.programPINFailed`).
    func programPINHeldBack(_ id: String) -> Bool {
        monitor.locked { state.programPINFailed.contains(id) }
    }

    /// Records how a login on the token `id` ended: a good one lets programs' PINs be tried again, a
    /// program's wrong one holds them back.
    func noteLogin(_ id: String, _ rv: CK_RV, fromProgram: Bool) {
        monitor.locked {
            if rv == CKR_OK {
                state.programPINFailed.remove(id)
            } else if fromProgram && (rv == CKR_PIN_INCORRECT || rv == CKR_PIN_LEN_RANGE || rv == CKR_PIN_LOCKED) {
                state.programPINFailed.insert(id)
            }
        }
    }

    /// The present token with the id `id`.
    func token(id: String) -> PresentToken? {
        monitor.locked { state.tokens[id] }
    }

    /// Looks at a module's tokens now (on its thread, from a job that already runs there).
    func rescan(_ index: Int, _ module: PKCS11Module) {
        scan(index, module)
    }

    /// PKCS#11's CK_INVALID_HANDLE: no session.
    static let invalidHandle: CK_SESSION_HANDLE = 0

    // MARK: - Loading

    private func loadModules() {
        var loaded: [PKCS11Module] = []
        var filenames: Set<String> = []
        if configuration.systemModules {
            let (entries, notes) = SystemModules.list()
            for note in notes { log.info("tokens: \(note)") }
            for entry in entries {
                // The resolved path is the one whose owners were checked: the file loaded is that one.
                guard let real = Self.resolved(entry.path), let functions = p11_kit_module_load(real, 0) else {
                    log.warning("tokens: cannot load the module \(entry.path)")
                    continue
                }
                filenames.insert(real)
                loaded.append(PKCS11Module(functions: functions, name: entry.name))
            }
        }
        for path in configuration.modules {
            guard let real = Self.resolved(path), !filenames.contains(real) else { continue }
            guard let functions = p11_kit_module_load(real, 0) else {
                log.warning("tokens: cannot load the module \(path)")
                continue
            }
            filenames.insert(real)
            loaded.append(
                PKCS11Module(functions: functions, name: Self.name(ofPath: path)))
        }
        for module in loaded {
            guard let worker = ModuleWorker(name: module.name) else {
                log.error("tokens: no thread for the module \(module.name)")
                continue
            }
            let index = monitor.locked { () -> Int in
                state.modules.append(LoadedModule(module: module, worker: worker))
                return state.modules.count - 1
            }
            // C_Initialize can hang (a reader daemon that does not answer): on the module's thread.
            worker.post { [self] in
                let rv = p11_kit_module_initialize(module.functions)
                if rv == CKR_OK {
                    monitor.locked { _ = state.ready.insert(index) }
                    log.info("tokens: module \(module.name) loaded")
                    watchSlotEvents(index, module)
                } else {
                    log.warning("tokens: module \(module.name) did not initialise (\(PKCS11Errors.name(rv)))")
                }
            }
        }
    }

    private static func owned(_ text: UnsafeMutablePointer<CChar>?) -> String? {
        guard let text else { return nil }
        defer { free(text) }
        return String(cString: text)
    }

    private static func resolved(_ path: String) -> String? {
        guard let real = realpath(path, nil) else { return nil }
        defer { free(real) }
        return String(cString: real)
    }

    /// `libsofthsm2.so` → `softhsm2`: the name p11-kit's configuration would give it.
    static func name(ofPath path: String) -> String {
        var name = Substring(path.split(separator: "/").last ?? Substring(path))
        if let dot = name.firstIndex(of: ".") { name = name[..<dot] }
        if name.hasPrefix("lib") { name = name.dropFirst(3) }
        return name.isEmpty ? "module" : String(name)
    }

    // MARK: - Watching

    /// Looks at every ready module's slots every `pollSeconds` (docs/TOKENS.md, "The watcher"), and at a
    /// module whose slot events are watched every `eventPollSeconds` at least (objects another program
    /// changes on a present token raise no event): a scan is queued on the module's thread unless the
    /// previous one is still running there (a hung module gets no pile of scans).
    private func watch() {
        let slowInterval = Duration.seconds(max(Self.eventPollSeconds, configuration.pollSeconds))
        while true {
            let due = monitor.locked { () -> [Int] in
                // A module stuck in a call for long is said once: its tokens stop answering, nothing else.
                for index in state.scanning where state.modules[index].worker.isStuck(longerThan: .seconds(30)) {
                    if state.stuck.insert(index).inserted {
                        log.warning("tokens: the module \(state.modules[index].module.name) has not answered for 30 s")
                    }
                }
                return state.ready.subtracting(state.scanning).sorted().filter { index in
                    guard state.eventDriven.contains(index), let last = state.lastLook[index] else { return true }
                    return ContinuousClock.now - last >= slowInterval
                }
            }
            for index in due { queueLook(index) }
            var pause = timespec(
                tv_sec: Int(configuration.pollSeconds),
                tv_nsec: Int((configuration.pollSeconds - configuration.pollSeconds.rounded(.down)) * 1e9))
            var remaining = timespec()
            while nanosleep(&pause, &remaining) == -1 && errno == EINTR { pause = remaining }
        }
    }

    /// Queues a look at module `index` on its thread, unless one is queued or running already: then a slot
    /// event asks for one more after it (the running look may have listed the slots before the change),
    /// so a module's looks never pile up, however many events it reports.
    func queueLook(_ index: Int, event: Bool = false) {
        let loaded = monitor.locked { () -> LoadedModule? in
            guard state.ready.contains(index) else { return nil }
            guard !state.scanning.contains(index) else {
                if event { state.lookAgain.insert(index) }
                return nil
            }
            state.scanning.insert(index)
            state.lastLook[index] = .now
            if event { state.eventLook.insert(index) }
            return state.modules[index]
        }
        guard let loaded else { return }
        let posted = loaded.worker.post { [self] in
            // An event before this point is seen by this look.
            let byEvent = monitor.locked { () -> Bool in
                let during = state.lookAgain.remove(index) != nil
                return state.eventLook.remove(index) != nil || during
            }
            scan(index, loaded.module, cause: byEvent ? " after a slot event" : "")
            let again = monitor.locked { () -> Bool in
                state.scanning.remove(index)
                return state.lookAgain.remove(index) != nil
            }
            if again { queueLook(index, event: true) }
        }
        if !posted {
            // The module's queue is full: the watcher tries again at its next tick (a lost slot event must
            // not wait for the slow poll of an event-driven module).
            monitor.locked {
                state.scanning.remove(index)
                state.eventLook.remove(index)
                state.lastLook[index] = nil
            }
        }
    }

    /// One look at a module's tokens (on its thread): new tokens get a session and are read, present ones
    /// are read again, and those gone are dropped with their session and login.
    /// `cause` ends the lines that log a token's coming and going (a slot event's look says so).
    private func scan(_ index: Int, _ module: PKCS11Module, cause: String = "") {
        var known = monitor.locked { state.tokens.filter { $0.value.module == index } }
        if configuration.restart.contains(module.name),
            !known.values.contains(where: { (try? module.isLoggedIn($0.session)) == true })
        {
            // A module without hot-plug (SoftHSM2 sees tokens made by other programs only when it starts):
            // started again, while no login of its tokens would be lost (docs/TOKENS.md, "The watcher").
            _ = p11_kit_module_finalize(module.functions)
            let rv = p11_kit_module_initialize(module.functions)
            guard rv == CKR_OK else {
                log.warning("tokens: \(module.name) did not initialise again (\(PKCS11Errors.name(rv)))")
                monitor.locked {
                    state.ready.remove(index)
                    for (id, token) in state.tokens where token.module == index { state.tokens[id] = nil }
                }
                return
            }
            // The sessions went with the old initialisation.
            for id in known.keys { known[id]?.session = Self.invalidHandle }
        }
        var seen: [String: PresentToken] = [:]
        let slots: [CK_SLOT_ID]
        do {
            slots = try module.slotsWithTokens()
        } catch {
            log.warning("tokens: \(module.name): \(error.call) failed (\(PKCS11Errors.name(error.rv)))")
            return
        }
        for slot in slots {
            guard let info = try? module.tokenInfo(slot), info.isInitialized else { continue }
            let id = TokenScan.tokenID(module: module.name, info: info)
            guard seen[id] == nil else { continue }  // the same serial twice in one module: the first only
            var session: CK_SESSION_HANDLE
            if let previous = known[id], previous.session != Self.invalidHandle, previous.view.slot == slot,
                (try? module.isLoggedIn(previous.session)) != nil
            {
                session = previous.session
            } else {
                if let previous = known[id], previous.session != Self.invalidHandle {
                    module.closeSession(previous.session)
                }
                guard let opened = try? module.openSession(slot) else { continue }
                session = opened
            }
            let view = TokenScan.scan(module, session: session, slot: slot, id: id, info: info)
            seen[id] = PresentToken(view: view, module: index, session: session)
        }
        for (id, gone) in known where seen[id] == nil {
            // A removed token's session is gone; this frees ours.
            if gone.session != Self.invalidHandle { module.closeSession(gone.session) }
            log.info("tokens: \(id) removed\(cause)")
        }
        for id in seen.keys where known[id] == nil {
            log.info("tokens: \(id) present (\(seen[id]!.view.items.count) items)\(cause)")
        }
        monitor.locked {
            for (id, token) in state.tokens where token.module == index && seen[id] == nil { state.tokens[id] = nil }
            for (id, token) in seen { state.tokens[id] = token }
        }
    }
}
