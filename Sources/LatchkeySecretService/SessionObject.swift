import LatchkeyDBus

/// `org.freedesktop.Secret.Session` at /org/freedesktop/secrets/session/N: there only for the
/// connection that opened it.
struct SessionObject: SecretServiceObject {
    let service: SecretService
    let bus: Bus
    let n: UInt64
    let caller: String

    static let interfaces = [
        BusInterface<SessionObject>(
            SS.Interface.session,
            methods: [
                BusMethod("Close") { try $0.close($1) }
            ])
    ]

    func checkExists() throws {
        guard sessions.exists(n, caller: caller) else { throw SecretServiceErrors.noSuchObject("no such session") }
    }

    func close(_ call: BusMethodCall) throws {
        sessions.close(n)
        try call.reply()
    }
}
