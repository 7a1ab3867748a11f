import CSystemd
import LatchkeySystem

#if canImport(Glibc)
    import Glibc
#endif

/// Which bus a `BusConnection` opens.
package enum BusEndpoint: Sendable, Equatable, CustomStringConvertible {
    /// The system bus: `$DBUS_SYSTEM_BUS_ADDRESS`, else `/run/dbus/system_bus_socket`.
    case system
    /// The user's session bus: `$DBUS_SESSION_BUS_ADDRESS`, else `$XDG_RUNTIME_DIR/bus`.
    case session
    /// An explicit D-Bus address, such as `unix:path=/run/user/1000/bus`.
    case address(String)

    package var description: String {
        switch self {
        case .system:
            "the system bus (\(getenv("DBUS_SYSTEM_BUS_ADDRESS").map { String(cString: $0) } ?? "/run/dbus/system_bus_socket"))"
        case .session:
            if let address = getenv("DBUS_SESSION_BUS_ADDRESS") {
                "the session bus (\(String(cString: address)))"
            } else if let runtime = getenv("XDG_RUNTIME_DIR") {
                "the session bus (\(String(cString: runtime))/bus)"
            } else {
                "the session bus (neither DBUS_SESSION_BUS_ADDRESS nor XDG_RUNTIME_DIR is set)"
            }
        case .address(let address):
            "the bus at \(address)"
        }
    }
}

/// A connection to a D-Bus bus, served by its own loop thread.
///
/// sd-bus objects are not thread-safe, so every sd-bus call for this connection happens on its loop
/// thread. Other threads hand work to it with `perform` (asynchronous) or `sync` (waits for the result);
/// the work receives the connection's `Bus`, through which it sends messages and registers handlers that
/// later run on the same thread. `BusConnection` itself may be used from any thread.
///
/// The connection ends with `close()` (or `deinit`), or when the bus goes away: then `onDisconnect` runs
/// once on the loop thread, later work is refused, and every registered handler is released.
package final class BusConnection: Sendable {
    /// Which bus this is.
    package let endpoint: BusEndpoint
    /// This connection's unique name (`:1.42`).
    package let uniqueName: String
    private let loop: Loop

    /// Connects and authenticates, blocking until the bus daemon has answered `Hello`.
    ///
    /// - Parameter onDisconnect: called once, on the loop thread, if the bus closes the connection
    ///   (not after `close()`).
    package init(_ endpoint: BusEndpoint, onDisconnect: (@Sendable (BusError) -> Void)? = nil) throws(BusError) {
        self.endpoint = endpoint
        let loop = try Loop()
        guard startDetachedThread({ loop.run(endpoint, onDisconnect: onDisconnect) }) else {
            throw BusError(errno: -EAGAIN, "starting the bus thread")
        }
        _ = loop.monitor.wait { loop.opened != nil }
        switch loop.monitor.locked({ loop.opened! }) {
        case .success(let name): uniqueName = name
        case .failure(let error): throw error
        }
        self.loop = loop
    }

    deinit { close() }

    /// Whether the loop still accepts work (false after `close()` or a lost connection).
    package var isOpen: Bool { loop.monitor.locked { !loop.finished && !loop.stopRequested } }

    /// Whether the caller runs on this connection's loop thread.
    package var isLoopThread: Bool { loop.isLoopThread }

    /// Queues `work` for the loop thread and returns at once; work runs in submission order. Returns false,
    /// without running it, when the connection is closed.
    @discardableResult
    package func perform(_ work: @escaping @Sendable (Bus) -> Void) -> Bool {
        loop.submit { bus in if let bus { work(bus) } }
    }

    /// Runs `work` on the loop thread and waits for its result (inline when called on the loop thread).
    /// Throws what `work` throws, or `BusError` (`Disconnected`) when the connection is closed.
    package func sync<T: Sendable>(_ work: @escaping @Sendable (Bus) throws -> T) throws -> T {
        if loop.isLoopThread, let bus = loop.bus { return try work(bus) }
        let result = ResultBox<T>()
        let queued = loop.submit { bus in
            let outcome: Result<T, any Error> =
                if let bus { Result { try work(bus) } } else { .failure(BusError.connectionClosed) }
            result.monitor.locked { result.value = outcome }
            result.monitor.broadcast()
        }
        guard queued else { throw BusError.connectionClosed }
        _ = result.monitor.wait { result.value != nil }
        return try result.monitor.locked { result.value! }.get()
    }

    /// Stops the loop, flushes what is queued for sending, and frees the connection with its handlers.
    /// Waits for the loop thread to finish, except when called on it (then it finishes after the current
    /// handler returns). Idempotent.
    package func close() {
        let onLoopThread = loop.isLoopThread
        loop.monitor.locked { loop.stopRequested = true }
        loop.wake()
        if !onLoopThread { _ = loop.monitor.wait { loop.exited } }
    }
}

/// A result handed from the loop thread to a caller blocked in `sync`.
private final class ResultBox<T: Sendable>: @unchecked Sendable {
    let monitor = Monitor()
    var value: Result<T, any Error>?  // guarded by monitor
}

/// The loop thread's state. The fields marked "guarded" are shared with other threads under `monitor`;
/// `bus` is touched only by the loop thread.
private final class Loop: @unchecked Sendable {
    typealias Work = @Sendable (Bus?) -> Void

    let monitor = Monitor()
    let wakeFD: Int32
    var opened: Result<String, BusError>?  // guarded: set once the connection is up or failed
    var queue: [Work] = []  // guarded
    var stopRequested = false  // guarded
    var finished = false  // guarded: no more work is accepted
    var exited = false  // guarded: the bus is freed and the thread is done
    var thread: pthread_t?  // guarded
    var bus: Bus?  // loop thread only

    init() throws(BusError) {
        wakeFD = eventfd(0, Int32(EFD_CLOEXEC | EFD_NONBLOCK))
        if wakeFD < 0 { throw BusError(errno: -Glibc.errno, "creating an eventfd") }
    }

    deinit { Glibc.close(wakeFD) }

    var isLoopThread: Bool {
        monitor.locked { thread.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    func submit(_ work: @escaping Work) -> Bool {
        let accepted = monitor.locked {
            guard !finished, !stopRequested else { return false }
            queue.append(work)
            return true
        }
        if accepted { wake() }
        return accepted
    }

    func wake() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, MemoryLayout<UInt64>.size)
    }

    func run(_ endpoint: BusEndpoint, onDisconnect: (@Sendable (BusError) -> Void)?) {
        let pointer: OpaquePointer
        do {
            pointer = try Self.open(endpoint)
        } catch {
            monitor.locked {
                opened = .failure(error)
                finished = true
                exited = true
            }
            monitor.broadcast()
            return
        }
        let bus = Bus(pointer: pointer, uniqueName: Self.uniqueName(pointer))
        self.bus = bus
        monitor.locked {
            opened = .success(bus.uniqueName)
            thread = pthread_self()
        }
        monitor.broadcast()

        let lost = serve(bus, pointer)

        let abandoned = monitor.locked {
            finished = true
            defer { queue = [] }
            return queue
        }
        for work in abandoned { work(nil) }
        if let lost { onDisconnect?(lost) }
        bus.invalidate()
        self.bus = nil
        // Frees the bus unless a caller still holds a message or a non-floating slot; its floating slots
        // go with it, and their destroy callbacks release every handler closure.
        sd_bus_flush_close_unref(pointer)
        monitor.locked { exited = true }
        monitor.broadcast()
    }

    /// Runs queued work and sd-bus dispatch until `close()` (returns nil) or the connection is lost
    /// (returns why).
    private func serve(_ bus: Bus, _ pointer: OpaquePointer) -> BusError? {
        while true {
            let (work, stop) = monitor.locked {
                defer { queue = [] }
                return (queue, stopRequested)
            }
            for item in work { item(bus) }
            if stop { return nil }

            // sd_bus_process handles one message per call; when the peer hangs up it first delivers
            // NoReply errors to pending calls and the Disconnected signal, then fails.
            var result: Int32
            repeat { result = sd_bus_process(pointer, nil) } while result > 0
            if result < 0 || sd_bus_is_open(pointer) <= 0 {
                return BusError(errno: result < 0 ? result : -ENOTCONN, "the connection to the bus was lost")
            }
            waitForActivity(pointer)
        }
    }

    private func waitForActivity(_ pointer: OpaquePointer) {
        var deadline: UInt64 = 0
        var timeout: Int32 = -1
        if sd_bus_get_timeout(pointer, &deadline) > 0, deadline != UInt64.max {
            var now = timespec()
            clock_gettime(CLOCK_MONOTONIC, &now)
            let nowMicroseconds = UInt64(now.tv_sec) * 1_000_000 + UInt64(now.tv_nsec) / 1000
            let remaining = deadline > nowMicroseconds ? (deadline - nowMicroseconds + 999) / 1000 : 0
            timeout = Int32(min(remaining, UInt64(Int32.max)))
        }
        let events = sd_bus_get_events(pointer)
        var fds = [
            pollfd(fd: sd_bus_get_fd(pointer), events: Int16(max(events, 0)), revents: 0),
            pollfd(fd: wakeFD, events: Int16(POLLIN), revents: 0),
        ]
        if poll(&fds, 2, timeout) > 0, fds[1].revents & Int16(POLLIN) != 0 {
            var value: UInt64 = 0
            _ = Glibc.read(wakeFD, &value, MemoryLayout<UInt64>.size)
        }
    }

    private static func open(_ endpoint: BusEndpoint) throws(BusError) -> OpaquePointer {
        var raw: OpaquePointer?
        let result: Int32
        switch endpoint {
        case .system:
            result = sd_bus_open_system(&raw)
        case .session:
            // sd-bus reads $DBUS_SESSION_BUS_ADDRESS, else $XDG_RUNTIME_DIR/bus, and fails without either.
            result = sd_bus_open_user(&raw)
        case .address(let address):
            result = Self.openAddress(address, &raw)
        }
        guard result >= 0, let raw else {
            if let raw { sd_bus_unref(raw) }
            throw BusError(errno: result < 0 ? result : -ENOTCONN, "connecting to \(endpoint)")
        }
        // Authentication and Hello finish asynchronously; wait for them so that errors surface here.
        var name: UnsafePointer<CChar>?
        let hello = sd_bus_get_unique_name(raw, &name)
        guard hello >= 0 else {
            sd_bus_flush_close_unref(raw)
            throw BusError(errno: hello, "connecting to \(endpoint)")
        }
        return raw
    }

    private static func openAddress(_ address: String, _ raw: inout OpaquePointer?) -> Int32 {
        var result = sd_bus_new(&raw)
        guard result >= 0, let bus = raw else { return result }
        result = sd_bus_set_address(bus, address)
        if result >= 0 { result = sd_bus_set_bus_client(bus, 1) }
        if result >= 0 { result = sd_bus_start(bus) }
        if result < 0 {
            sd_bus_unref(bus)
            raw = nil
        }
        return result
    }

    private static func uniqueName(_ pointer: OpaquePointer) -> String {
        var name: UnsafePointer<CChar>?
        _ = sd_bus_get_unique_name(pointer, &name)
        return name.map { String(cString: $0) } ?? ""
    }
}
