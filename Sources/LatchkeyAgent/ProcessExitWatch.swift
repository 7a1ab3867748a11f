import CLatchkeySystem
import LatchkeySystem

#if canImport(Glibc)
    import Glibc
#endif

/// Reports the exit of processes the agent follows (login processes, by their pidfds): one epoll set and
/// one thread that waits on it for the life of the agent, so that following thousands of sessions costs a
/// descriptor each and no thread.
///
/// Each process is watched under a key of the caller's; `onExit` receives the key, on the watch's thread,
/// once the process has exited (level-triggered: again on every wait until the caller stops watching it,
/// which it does by `forget` or by dropping the handle, whose close removes it from the set). Keys are
/// never reused by the caller, so a report that crosses a `forget` names nothing and is ignored there.
/// The set and its thread last as long as the agent (the set is never closed under the thread).
final class ProcessExitWatch: Sendable {
    private let watch: Int32
    private let started = Locked(false)

    /// Nil when the kernel gives no epoll set (out of descriptors): sessions then count until closed.
    init?() {
        watch = latchkey_exit_watch_create()
        if watch < 0 { return nil }
    }

    /// Starts the thread that calls `onExit`; false when it cannot start (then nothing is reported).
    func start(onExit: @escaping @Sendable (UInt64) -> Void) -> Bool {
        let watch = self.watch
        let first = started.withLock { started in
            defer { started = true }
            return !started
        }
        guard first else { return true }
        return startDetachedThread {
            var keys = [UInt64](repeating: 0, count: 64)
            while true {
                let count = keys.withUnsafeMutableBufferPointer {
                    latchkey_exit_watch_wait(watch, $0.baseAddress, Int32($0.count))
                }
                if count < 0 {
                    AgentLog.error("waiting for login processes to exit: \(String(cString: strerror(errno)))")
                    usleep(100_000)  // not a spin, should the set ever fail
                    continue
                }
                for key in keys[0..<Int(count)] { onExit(key) }
            }
        }
    }

    /// Watches `process` under `key`; nil, or why the kernel refused.
    func watch(_ process: ProcessHandle, key: UInt64) -> String? {
        guard latchkey_exit_watch_add(watch, process.descriptor, key) != 0 else { return nil }
        return String(cString: strerror(errno))
    }

    /// Stops watching `process` (before its handle is dropped).
    func forget(_ process: ProcessHandle) {
        _ = latchkey_exit_watch_remove(watch, process.descriptor)
    }
}
