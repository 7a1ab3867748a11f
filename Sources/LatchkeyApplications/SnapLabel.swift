/// A snap's name from the AppArmor label its processes run under: snapd confines every app of a
/// strictly confined snap with the profile `snap.NAME.APP` (hooks: `snap.NAME.hook.HOOK`), and
/// `/proc/PID/attr/current` reads `snap.NAME.APP (enforce)`.
///
/// Only an enforced profile counts: in complain mode (a devmode snap) the profile stops nothing, so the
/// label says nothing about what the process could have done to others. A stacked or namespaced label
/// (`//&`, `:ns:`) is not one snapd gives and is refused rather than guessed at.
package enum SnapLabel {
    /// The snap's instance name (`NAME`, or `NAME_KEY` for a parallel install), or nil when `label` is
    /// not an enforced snap label.
    package static func snapName(_ label: [UInt8]) -> String? {
        var bytes = label[...]
        // The kernel ends it with a newline; some interfaces with a NUL.
        while let last = bytes.last, last == 0 || last == UInt8(ascii: "\n") { bytes = bytes.dropLast() }
        let mode = Array(" (enforce)".utf8)
        guard bytes.count > mode.count, bytes.suffix(mode.count).elementsEqual(mode) else { return nil }
        let parts = bytes.dropLast(mode.count).split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        guard parts.count >= 3, parts[0].elementsEqual("snap".utf8), isInstanceName(parts[1]) else { return nil }
        if parts[2].elementsEqual("hook".utf8) {
            guard parts.count == 4, isHookName(parts[3]) else { return nil }
        } else {
            guard parts.count == 3, isAppName(parts[2]) else { return nil }
        }
        return String(decoding: parts[1], as: UTF8.self)
    }

    /// snapd's snap names (`ValidateName`): 1 to 40 of `a-z 0-9 -`, at least one letter, no `-` at either
    /// end or twice in a row; with an optional `_KEY` of 1 to 10 of `a-z 0-9` (an instance key).
    static func isInstanceName(_ name: ArraySlice<UInt8>) -> Bool {
        let pieces = name.split(separator: UInt8(ascii: "_"), omittingEmptySubsequences: false)
        guard pieces.count == 1 || pieces.count == 2 else { return false }
        let snap = pieces[0]
        guard (1...40).contains(snap.count), snap.contains(where: isLowercaseLetter),
            snap.allSatisfy({ isLowercaseLetter($0) || isDigit($0) || $0 == UInt8(ascii: "-") }),
            snap.first != UInt8(ascii: "-"), snap.last != UInt8(ascii: "-"),
            !zip(snap, snap.dropFirst()).contains(where: { $0 == UInt8(ascii: "-") && $1 == UInt8(ascii: "-") })
        else { return false }
        guard pieces.count == 2 else { return true }
        let key = pieces[1]
        return (1...10).contains(key.count) && key.allSatisfy { isLowercaseLetter($0) || isDigit($0) }
    }

    /// snapd's app names: letters, digits and single `-` between them.
    static func isAppName(_ name: ArraySlice<UInt8>) -> Bool {
        !name.isEmpty && name.first != UInt8(ascii: "-") && name.last != UInt8(ascii: "-")
            && name.allSatisfy {
                isLowercaseLetter($0) || isUppercaseLetter($0) || isDigit($0) || $0 == UInt8(ascii: "-")
            }
            && !zip(name, name.dropFirst()).contains(where: { $0 == UInt8(ascii: "-") && $1 == UInt8(ascii: "-") })
    }

    /// snapd's hook names: `a-z 0-9 -`, not starting or ending with `-`.
    static func isHookName(_ name: ArraySlice<UInt8>) -> Bool {
        !name.isEmpty && name.first != UInt8(ascii: "-") && name.last != UInt8(ascii: "-")
            && name.allSatisfy { isLowercaseLetter($0) || isDigit($0) || $0 == UInt8(ascii: "-") }
    }

    private static func isLowercaseLetter(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")
    }
    private static func isUppercaseLetter(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z")
    }
    private static func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
}
