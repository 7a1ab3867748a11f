#if canImport(Glibc)
    import Glibc
#endif

/// The process environment, read without Foundation.
package enum Environment {
    /// The value of `name`, or nil when it is unset or empty (an empty variable means "not set" to every
    /// caller here, as to most Unix programs).
    package static func value(_ name: String) -> String? {
        guard let raw = getenv(name) else { return nil }
        let value = String(cString: raw)
        return value.isEmpty ? nil : value
    }

    /// The variables that put code or programs of someone else's choosing into a process started with
    /// them, each with its `=`: the dynamic loader's (`LD_PRELOAD`, `LD_LIBRARY_PATH`, `LD_AUDIT`),
    /// glibc's iconv modules, OpenSSL's configuration and modules, the Swift runtime's crash handler
    /// (which runs the program `SWIFT_BACKTRACE` names and serves it the crashed process's memory), and
    /// those of the PKCS#11 modules the agent loads: OpenSC's configuration and card driver (a
    /// `card_driver` block's `module` is a library OpenSC opens), the PC/SC daemon's socket and p11-kit's
    /// remote module server (either would let another program stand in for a token).
    /// The one list in Swift: the library leaves them out of an agent it starts, and the agent gives no
    /// application identity to a caller started with one (docs/IDENTITY.md); pam/peer.c keeps the same
    /// list in C for the agent it hands keys to.
    package static let codeVariables = [
        "LD_PRELOAD=", "LD_LIBRARY_PATH=", "LD_AUDIT=", "GCONV_PATH=", "OPENSSL_CONF=", "OPENSSL_MODULES=",
        "OPENSSL_ENGINES=", "SWIFT_BACKTRACE=", "OPENSC_CONF=", "OPENSC_DRIVER=", "PCSCLITE_CSOCK_NAME=",
        "P11_KIT_SERVER_ADDRESS=",
    ]

    /// Every `NAME=value` entry, in the order of `environ`; for building a child's environment.
    package static func entries() -> [String] {
        var result: [String] = []
        var pointer = environ
        while let entry = pointer.pointee {
            result.append(String(cString: entry))
            pointer += 1
        }
        return result
    }
}
