import LatchkeyEngine
import LatchkeyModel

#if canImport(Glibc)
    import Glibc
#endif

/// Login sessions: opened by pam_latchkey (or any process of the user), ended by their close, by the
/// exit of their login process, or by logind removing them; the end of the last one locks every
/// password class (docs/PROTOCOL.md, "Hand-off").
extension AgentService {
    /// The watch for login processes, nil (logged) when the kernel gives none.
    /// Each followed login process holds a descriptor (its pidfd): `AgentMain` has raised the open-file
    /// limit for them (`ConnectionLimits.raiseDescriptorLimit`).
    static func makeExitWatch() -> ProcessExitWatch? {
        guard let exits = ProcessExitWatch() else {
            AgentLog.warning(
                "cannot watch login processes (epoll: \(String(cString: strerror(errno)))): a login session "
                    + "counts until it is closed or logind removes it")
            return nil
        }
        return exits
    }

    /// Starts reporting the exits `exits` sees to this service (once it is fully made).
    func followLoginProcesses(_ exits: ProcessExitWatch?) {
        guard let exits else { return }
        if !exits.start(onExit: { [weak self] key in self?.loginProcessExited(key: key) }) {
            AgentLog.warning(
                "cannot start the thread that watches login processes: a login session counts until it is "
                    + "closed or logind removes it")
        }
    }

    /// Counts a session, following its login process when the kernel can say who it is.
    func openSession(_ token: [UInt8], logindSession: String?, caller: Caller, peer: PeerProcess) throws(SecError) {
        let inLogind = logindSession.map { ", logind session \($0)" } ?? ""
        let process: ProcessHandle?
        switch peer {
        case .running(let handle):
            process = handle
        case .gone:
            // The login process exited before its session was counted: the session is over already,
            // and ends as if its process had exited a moment later.
            let remaining = sessions.ifNoneOpen(lockAll)
            AgentLog.info(
                "a login session of pid \(caller.pid)\(inLogind) ended as it opened: its login process has exited"
                    + (remaining == 0 ? "; no other login session: locked all password classes" : ""))
            return
        case .unknown(let reason):
            process = nil
            AgentLog.warning(
                "cannot follow the login process of pid \(caller.pid) (\(reason)): its session counts until it "
                    + "is closed\(logindSession == nil ? "" : " or logind removes it")")
        }
        guard let opened = sessions.open(token, logindSession: logindSession, process: process) else {
            throw SecError(SecStatus.param, "too many open login sessions (\(SessionTracker.maximumSessions))")
        }
        if let unwatched = opened.unwatched {
            AgentLog.warning(
                "cannot watch the login process of pid \(caller.pid) (\(unwatched)): its session counts until "
                    + "it is closed\(logindSession == nil ? "" : " or logind removes it")")
        }
        AgentLog.info("login session opened (\(opened.count) open; pid \(caller.pid)\(inLogind))")
    }

    /// The exit watch reports that the login process of the session watched under `key` has exited.
    func loginProcessExited(key: UInt64) {
        guard let (session, remaining) = sessions.processExited(key: key, whenNoneLeft: lockAll) else { return }
        let pid = session.process.map { " (pid \($0.pid))" } ?? ""
        let inLogind = session.logindSession.map { ", logind session \($0)" } ?? ""
        sessionEnded("the login process\(pid) of a session\(inLogind) exited without closing it", remaining)
    }

    /// logind removed session `id` (`SessionRemoved` from the owner of org.freedesktop.login1).
    package func logindSessionRemoved(_ id: String) {
        let (ended, remaining) = sessions.logindSessionRemoved(id, whenNoneLeft: lockAll)
        guard !ended.isEmpty else { return }
        sessionEnded("logind removed session \(id) (\(ended.count) login session(s) in it)", remaining)
    }

    private func sessionEnded(_ what: String, _ remaining: Int) {
        AgentLog.info(
            remaining == 0
                ? "\(what): it was the last login session: locked all password classes"
                : "\(what): \(remaining) login session(s) still open")
    }

    /// Locks every password class, as the close of the last session does (run with the tracker's lock held).
    func lockAll() {
        keychain.lock(all: true)
    }
}
