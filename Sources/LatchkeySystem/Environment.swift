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
