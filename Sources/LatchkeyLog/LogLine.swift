import Logging

#if canImport(Glibc)
    import Glibc
#endif

/// One line of the agent's log: `2026-11-24T04:21:54Z latchkeyd[PID] info: message`, UTC, ending in a
/// newline, the format the agent has always written (man/latchkeyd.8, "LOG").
///
/// A line is always exactly one line. Messages may carry names that peers chose (a collection's label, a
/// bus name), so a newline in one must not start what looks like a second entry: control characters
/// (C0, DEL, C1), the Unicode line and paragraph separators and the backslash are written as Swift-style
/// escapes (`\n`, `\r`, `\t`, `\\`, `\u{1b}`), which keeps the line readable and the escaping reversible.
/// Everything else, including other non-ASCII text, is written as it is.
package enum LogLine {
    /// The program name in every line.
    package static let program = "latchkeyd"

    /// The line for `level` and `message` at `seconds` since the epoch, from process `pid`.
    ///
    /// The level prints as its swift-log name: today's `info`, `warning` and `error` as before, and
    /// `trace`, `debug`, `notice` and `critical` under their own names. Metadata, when there is any,
    /// follows the message as ` key=value` pairs sorted by key (escaped like the message), so a line
    /// without metadata is exactly what the agent wrote before it used swift-log.
    package static func format(
        level: Logger.Level, message: String, metadata: Logger.Metadata? = nil,
        seconds: Int, pid: Int32
    ) -> String {
        var line = timestamp(seconds: seconds) + " \(program)[\(pid)] \(level.rawValue): " + escaped(message)
        if let metadata {
            for (key, value) in metadata.sorted(by: { $0.key < $1.key }) {
                line += " " + escaped(key) + "=" + escaped("\(value)")
            }
        }
        return line + "\n"
    }

    /// The line for `level` and `message` now, from this process.
    package static func now(_ level: Logger.Level, _ message: String, metadata: Logger.Metadata? = nil) -> String {
        var clock = timespec()
        clock_gettime(CLOCK_REALTIME, &clock)
        return format(level: level, message: message, metadata: metadata, seconds: Int(clock.tv_sec), pid: getpid())
    }

    /// `YYYY-MM-DDTHH:MM:SSZ` in UTC.
    package static func timestamp(seconds: Int) -> String {
        var time = tm()
        var value = time_t(seconds)
        gmtime_r(&value, &time)
        return String(Int(time.tm_year) + 1900) + "-" + twoDigits(Int(time.tm_mon) + 1) + "-"
            + twoDigits(Int(time.tm_mday))
            + "T" + twoDigits(Int(time.tm_hour)) + ":" + twoDigits(Int(time.tm_min)) + ":" + twoDigits(Int(time.tm_sec))
            + "Z"
    }

    /// `text` with every character that could break or disguise a line escaped (see the type's comment);
    /// `text` itself when it has none, which is every message the agent writes today but for a backslash.
    package static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var result = ""
        result.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            case _ where needsEscape(scalar): result += "\\u{" + String(scalar.value, radix: 16) + "}"
            default: result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    private static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0..<0x20, 0x5C, 0x7F...0x9F, 0x2028, 0x2029: true
        default: false
        }
    }

    private static func twoDigits(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
}
