import CSystemd

#if canImport(Glibc)
    import Glibc
#endif

/// The sd-bus operations of one connection, usable only on that connection's loop thread.
///
/// Threading: a `Bus` is handed to work submitted with `BusConnection.perform`/`sync` and is captured by
/// the handlers registered through it; all of them run on the loop thread. It is deliberately not
/// `Sendable`, and neither are `BusMessage` and `BusSlot`: sd-bus objects are not thread-safe.
///
/// Handlers (matches, objects, reply callbacks) must not block: the loop serves nothing else while one
/// runs. The synchronous `call` blocks the loop thread until the reply arrives; use `callAsync` to talk to
/// peers that may be slow.
package final class Bus {
    /// Borrowed from the connection's loop; nil once the connection is closed.
    private(set) var pointer: OpaquePointer?
    /// This connection's unique name on the bus (`:1.42`).
    package let uniqueName: String

    init(pointer: OpaquePointer, uniqueName: String) {
        self.pointer = pointer
        self.uniqueName = uniqueName
    }

    func invalidate() { pointer = nil }

    private func bus() throws(BusError) -> OpaquePointer {
        guard let pointer else { throw BusError.connectionClosed }
        return pointer
    }

    // MARK: Messages

    /// A new method call to fill with `append` and send with `call`, `callAsync` or `send`.
    package func methodCall(destination: String?, path: String, interface: String?, member: String)
        throws(BusError) -> BusMessage
    {
        var raw: OpaquePointer?
        try check(
            sd_bus_message_new_method_call(try bus(), &raw, destination, path, interface, member),
            "creating a call to \(interface ?? "").\(member)")
        return BusMessage(adopting: raw!)
    }

    /// A new signal to fill with `append` and broadcast with `send`.
    package func signal(path: String, interface: String, member: String) throws(BusError) -> BusMessage {
        var raw: OpaquePointer?
        try check(
            sd_bus_message_new_signal(try bus(), &raw, path, interface, member),
            "creating the signal \(interface).\(member)")
        return BusMessage(adopting: raw!)
    }

    /// Queues a message (a signal, a call that expects no reply) for sending.
    package func send(_ message: BusMessage) throws(BusError) {
        try check(sd_bus_send(try bus(), message.pointer, nil), "sending a message")
    }

    /// Broadcasts a signal carrying `arguments`.
    package func emitSignal(
        path: String, interface: String, member: String, _ arguments: [BusValue] = [], destination: String? = nil
    ) throws(BusError) {
        let message = try signal(path: path, interface: interface, member: member)
        // A signal for one client (a state that is that client's alone) goes to it only.
        if let destination {
            try check(sd_bus_message_set_destination(message.pointer, destination), "addressing a signal")
        }
        try message.append(arguments)
        try send(message)
    }

    // MARK: Calls

    /// Sends a method call and blocks the loop thread until its reply; a method error reply is thrown.
    /// `timeout` nil means sd-bus's default (25 s).
    package func call(_ message: BusMessage, timeout: Duration? = nil) throws(BusError) -> BusMessage {
        var error = sd_bus_error()
        defer { sd_bus_error_free(&error) }
        var reply: OpaquePointer?
        let result = sd_bus_call(try bus(), message.pointer, microseconds(timeout), &error, &reply)
        if result < 0 {
            if let reply { sd_bus_message_unref(reply) }
            throw error.name != nil ? BusError(&error) : BusError(errno: result, "calling \(message.member ?? "")")
        }
        return BusMessage(adopting: reply!)
    }

    /// Calls a method with `arguments` and blocks the loop thread until its reply (see `call(_:timeout:)`).
    package func call(
        destination: String, path: String, interface: String, member: String,
        _ arguments: [BusValue] = [], timeout: Duration? = nil
    ) throws(BusError) -> BusMessage {
        let message = try methodCall(destination: destination, path: path, interface: interface, member: member)
        try message.append(arguments)
        return try call(message, timeout: timeout)
    }

    /// Sends a method call; `reply` runs later on the loop thread with the reply or the error (a method
    /// error, a timeout, or the connection closing). Cancelling the returned slot drops the callback.
    @discardableResult
    package func callAsync(
        _ message: BusMessage, timeout: Duration? = nil,
        reply: @escaping (Result<BusMessage, BusError>) -> Void
    ) throws(BusError) -> BusSlot {
        let pointer = try bus()
        return try register(
            "calling \(message.member ?? "")",
            { message, _ in
                if let error = message.error { reply(.failure(error)) } else { reply(.success(message)) }
                return 0
            }
        ) { slot, userdata in
            sd_bus_call_async(pointer, slot, message.pointer, Bus.dispatch, userdata, microseconds(timeout))
        }
    }

    /// Calls a method with `arguments` without blocking (see `callAsync(_:timeout:reply:)`).
    @discardableResult
    package func callAsync(
        destination: String, path: String, interface: String, member: String,
        _ arguments: [BusValue] = [], timeout: Duration? = nil,
        reply: @escaping (Result<BusMessage, BusError>) -> Void
    ) throws(BusError) -> BusSlot {
        let message = try methodCall(destination: destination, path: path, interface: interface, member: member)
        try message.append(arguments)
        return try callAsync(message, timeout: timeout, reply: reply)
    }

    // MARK: Matches, objects, names

    /// Installs a match rule (see `signalRule`) on the bus daemon, waiting for it to be accepted, and runs
    /// `handler` on the loop thread for every matching message until the connection closes or the
    /// returned slot is cancelled.
    ///
    /// A rule's `sender=` with a well-known name is only the daemon's filter; when a message's origin
    /// matters, compare `message.sender` with the name's current owner yourself.
    @discardableResult
    package func addMatch(_ rule: String, handler: @escaping (BusMessage) -> Void) throws(BusError) -> BusSlot {
        let pointer = try bus()
        return try register(
            "adding the match \(rule)",
            { message, _ in
                handler(message)
                return 0  // let every other match see the message too
            }
        ) { slot, userdata in
            sd_bus_add_match(pointer, slot, rule, Bus.dispatch, userdata)
        }
    }

    /// What an object handler did with a method call.
    package enum Dispatch: Sendable {
        /// The handler replied, or will reply later with `BusMessage.reply`.
        case handled
        /// Not ours: sd-bus continues, and finally replies `UnknownMethod` or `UnknownObject`.
        case notHandled
    }

    /// Serves the object at `path`: `handler` sees every method call to exactly that path, on the loop
    /// thread. A `BusError` it throws is sent back as the error reply; any other error as `Failed`.
    @discardableResult
    package func addObject(path: String, handler: @escaping (BusMessage) throws -> Dispatch) throws(BusError)
        -> BusSlot
    {
        let pointer = try bus()
        return try register("serving \(path)", Bus.objectBody(handler)) { slot, userdata in
            sd_bus_add_object(pointer, slot, path, Bus.dispatch, userdata)
        }
    }

    /// Serves `prefix` and every object path under it, like `addObject`; an object registered with
    /// `addObject` for an exact path is asked first.
    @discardableResult
    package func addFallback(prefix: String, handler: @escaping (BusMessage) throws -> Dispatch) throws(BusError)
        -> BusSlot
    {
        let pointer = try bus()
        return try register("serving \(prefix)/…", Bus.objectBody(handler)) { slot, userdata in
            sd_bus_add_fallback(pointer, slot, prefix, Bus.dispatch, userdata)
        }
    }

    /// Options for `requestName`, as in the D-Bus specification's `RequestName`.
    package struct NameFlags: OptionSet, Sendable {
        package let rawValue: UInt64
        package init(rawValue: UInt64) { self.rawValue = rawValue }
        package static let replaceExisting = NameFlags(rawValue: UInt64(SD_BUS_NAME_REPLACE_EXISTING))
        package static let allowReplacement = NameFlags(rawValue: UInt64(SD_BUS_NAME_ALLOW_REPLACEMENT))
        package static let queue = NameFlags(rawValue: UInt64(SD_BUS_NAME_QUEUE))
    }

    /// Requests a well-known name and waits for the daemon's answer. Returns true when this connection
    /// is now the primary owner, false when it was queued (`.queue`); throws when the name is taken.
    @discardableResult
    package func requestName(_ name: String, flags: NameFlags = []) throws(BusError) -> Bool {
        try check(sd_bus_request_name(try bus(), name, flags.rawValue), "requesting the name \(name)") > 0
    }

    /// Gives up a well-known name and waits for the daemon's answer.
    package func releaseName(_ name: String) throws(BusError) {
        try check(sd_bus_release_name(try bus(), name), "releasing the name \(name)")
    }

    /// A match rule for signals; nil fields match anything. Values are quoted as the D-Bus specification
    /// requires.
    package static func signalRule(
        sender: String? = nil, path: String? = nil, pathNamespace: String? = nil,
        interface: String? = nil, member: String? = nil, arg0: String? = nil
    ) -> String {
        let fields = [
            ("sender", sender), ("path", path), ("path_namespace", pathNamespace),
            ("interface", interface), ("member", member), ("arg0", arg0),
        ]
        return
            (["type='signal'"]
            + fields.compactMap { key, value in
                value.map { "\(key)='" + $0.replacingAll("'", with: "'\\''") + "'" }
            }).joined(separator: ",")
    }

    // MARK: Callbacks from C

    /// Registers a C callback whose userdata is a retained `CallbackBox`. The box is released by the
    /// slot's destroy callback, i.e. when sd-bus frees the slot: on `BusSlot.cancel`, after an async
    /// reply, or when the connection is freed.
    private func register(
        _ operation: String, _ body: @escaping CallbackBox.Body,
        _ add: (UnsafeMutablePointer<OpaquePointer?>, UnsafeMutableRawPointer) -> Int32
    )
        throws(BusError) -> BusSlot
    {
        let userdata = Unmanaged.passRetained(CallbackBox(body)).toOpaque()
        var slot: OpaquePointer?
        let result = add(&slot, userdata)
        guard result >= 0, let slot else {
            Unmanaged<CallbackBox>.fromOpaque(userdata).release()
            throw BusError(errno: result < 0 ? result : -EINVAL, operation)
        }
        sd_bus_slot_set_destroy_callback(slot) { userdata in
            Unmanaged<CallbackBox>.fromOpaque(userdata!).release()
        }
        // Floating: the bus keeps the slot alive; the BusSlot holds a second reference only for `cancel`.
        sd_bus_slot_set_floating(slot, 1)
        return BusSlot(slot)
    }

    private static let dispatch: sd_bus_message_handler_t = { message, userdata, error in
        let box = Unmanaged<CallbackBox>.fromOpaque(userdata!).takeUnretainedValue()
        return box.body(BusMessage(borrowing: message!), error)
    }

    private static func objectBody(_ handler: @escaping (BusMessage) throws -> Dispatch) -> CallbackBox.Body {
        { message, replyError in
            do {
                return try handler(message) == .handled ? 1 : 0
            } catch {
                // sd-bus sends `replyError` back as the error reply when the result is negative.
                let busError =
                    error as? BusError
                    ?? BusError(name: BusError.Name.failed, message: String(describing: error))
                let result = sd_bus_error_set(replyError, busError.name, busError.message)
                return result < 0 ? result : -EIO
            }
        }
    }
}

/// A callback registered with sd-bus (a match, a served object, a pending call).
///
/// Dropping a `BusSlot` leaves the registration in place for the connection's lifetime; `cancel()` removes
/// it. Threading: loop-thread only, like `Bus`.
package final class BusSlot {
    private var pointer: OpaquePointer?

    /// Takes over the caller's reference; the bus holds the floating one.
    init(_ pointer: OpaquePointer) { self.pointer = pointer }

    deinit { if let pointer { sd_bus_slot_unref(pointer) } }

    /// Removes the match, object or pending call; its handler will not run again.
    package func cancel() {
        guard let slot = pointer else { return }
        pointer = nil
        // Take back the bus's floating reference (fails harmlessly if the slot is already disconnected),
        // then drop both: sd-bus frees the slot and its destroy callback releases the handler.
        _ = sd_bus_slot_set_floating(slot, 0)
        sd_bus_slot_unref(slot)
    }
}

/// The Swift side of a C callback: a closure sd-bus reaches through the slot's userdata.
final class CallbackBox {
    typealias Body = (BusMessage, UnsafeMutablePointer<sd_bus_error>?) -> Int32
    let body: Body
    init(_ body: @escaping Body) { self.body = body }
}

func microseconds(_ duration: Duration?) -> UInt64 {
    guard let duration else { return 0 }  // sd-bus: 0 means its default timeout
    let (seconds, attoseconds) = duration.components
    return UInt64(max(0, seconds)) * 1_000_000 + UInt64(max(0, attoseconds) / 1_000_000_000_000)
}

private extension String {
    func replacingAll(_ target: Character, with replacement: String) -> String {
        var result = ""
        for character in self { if character == target { result += replacement } else { result.append(character) } }
        return result
    }
}
