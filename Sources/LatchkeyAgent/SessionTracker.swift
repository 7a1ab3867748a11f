import LatchkeySystem

/// The login sessions pam_latchkey announced. When the last one ends, the password classes are locked
/// (what logout means). A session ends when it is closed, when its login process exits (followed by a
/// pidfd: a killed sshd or a crashed display manager never sends the close), or when logind removes the
/// session it belongs to.
///
/// Tokens are random per session; an unknown token is ignored, so a close from before an agent restart
/// cannot lock a newer session's keys. The `whenNoneLeft` actions run with the tracker's lock held, so
/// a session opening meanwhile (whose login hands over its key right after) is counted either before the
/// check, and nothing is locked, or after the lock, and its key arrives once the lock is done.
final class SessionTracker: Sendable {
    /// One open session.
    struct Session: Sendable {
        let token: [UInt8]
        /// logind's id for the session (`XDG_SESSION_ID`), when the module knew it.
        let logindSession: String?
        /// The login process, when it can be followed.
        let process: ProcessHandle?
        /// Never reused: what the exit watch reports.
        let key: UInt64
    }

    /// What `open` did.
    struct Opened {
        /// Sessions open now.
        let count: Int
        /// Why the login process is not watched, if it is not (the session then counts until it is
        /// closed or logind removes it).
        let unwatched: String?
    }

    /// What `close` found.
    enum Closing: Equatable {
        /// The session was open; `remaining` are still open.
        case closed(remaining: Int)
        /// The session had ended already (its process exited or logind removed it): nothing to do.
        case endedEarlier
        /// A token this agent never saw (it started after the login).
        case unknown(remaining: Int)
    }

    /// Sessions tracked at most, so that a confused or hostile opener cannot grow the set forever. An
    /// ended session frees its slot at once.
    static let maximumSessions = 4096
    /// Tokens of sessions that ended without a close, remembered so that a late close is recognised.
    static let rememberedEndings = 64

    private struct State {
        var sessions: [[UInt8]: Session] = [:]
        var tokens: [UInt64: [UInt8]] = [:]  // by key
        var nextKey: UInt64 = 1
        var ended: [[UInt8]] = []  // oldest first, at most rememberedEndings
    }

    private let state = Locked(State())
    private let exits: ProcessExitWatch?

    /// - Parameter exits: where login processes are watched; nil: they are not (the sessions count
    ///   until they are closed or logind removes them).
    init(exits: ProcessExitWatch?) {
        self.exits = exits
    }

    var count: Int {
        state.withLock { $0.sessions.count }
    }

    /// Records a session; nil when the limit is reached. A token already open stays as it was.
    func open(_ token: [UInt8], logindSession: String? = nil, process: ProcessHandle? = nil) -> Opened? {
        state.withLock { state in
            if state.sessions[token] != nil { return Opened(count: state.sessions.count, unwatched: nil) }
            guard state.sessions.count < SessionTracker.maximumSessions else { return nil }
            let key = state.nextKey
            state.nextKey += 1
            var unwatched: String?
            if let process {
                // Added with the lock held, so an exit reported at once finds the session.
                unwatched = exits.map { $0.watch(process, key: key) } ?? "no exit watch"
            }
            state.sessions[token] = Session(
                token: token, logindSession: logindSession, process: unwatched == nil ? process : nil, key: key)
            state.tokens[key] = token
            state.ended.removeAll { $0 == token }
            return Opened(count: state.sessions.count, unwatched: unwatched)
        }
    }

    /// Forgets a closed session. `whenNoneLeft` runs (with the lock held) when it was the last one, and
    /// for an unknown token when none is known to be open.
    func close(_ token: [UInt8], whenNoneLeft: () -> Void) -> Closing {
        state.withLock { state in
            if remove(token, from: &state) != nil {
                if state.sessions.isEmpty { whenNoneLeft() }
                return .closed(remaining: state.sessions.count)
            }
            if let index = state.ended.firstIndex(of: token) {
                state.ended.remove(at: index)
                return .endedEarlier
            }
            if state.sessions.isEmpty { whenNoneLeft() }
            return .unknown(remaining: state.sessions.count)
        }
    }

    /// The session watched under `key` lost its login process. Returns it and how many remain, or nil
    /// when it had ended already; `whenNoneLeft` runs (with the lock held) when it was the last one.
    func processExited(key: UInt64, whenNoneLeft: () -> Void) -> (session: Session, remaining: Int)? {
        state.withLock { state in
            guard let token = state.tokens[key], let session = remove(token, from: &state) else { return nil }
            remember(token, in: &state)
            if state.sessions.isEmpty { whenNoneLeft() }
            return (session, state.sessions.count)
        }
    }

    /// logind removed session `id`: every session in it ends. Returns those and how many remain;
    /// `whenNoneLeft` runs (with the lock held) when they were the last ones.
    func logindSessionRemoved(_ id: String, whenNoneLeft: () -> Void) -> (ended: [Session], remaining: Int) {
        state.withLock { state in
            let tokens = state.sessions.values.filter { $0.logindSession == id }.map(\.token)
            let ended = tokens.compactMap { remove($0, from: &state) }
            for token in tokens { remember(token, in: &state) }
            if !ended.isEmpty && state.sessions.isEmpty { whenNoneLeft() }
            return (ended, state.sessions.count)
        }
    }

    /// Runs `action` (with the lock held) when no session is open; returns how many are.
    func ifNoneOpen(_ action: () -> Void) -> Int {
        state.withLock { state in
            if state.sessions.isEmpty { action() }
            return state.sessions.count
        }
    }

    private func remove(_ token: [UInt8], from state: inout State) -> Session? {
        guard let session = state.sessions.removeValue(forKey: token) else { return nil }
        state.tokens[session.key] = nil
        // The handle (and its pidfd) is closed when the caller drops the session.
        if let process = session.process { exits?.forget(process) }
        return session
    }

    private func remember(_ token: [UInt8], in state: inout State) {
        state.ended.append(token)
        if state.ended.count > SessionTracker.rememberedEndings { state.ended.removeFirst() }
    }
}
