import Foundation
import LatchkeySecrets

#if canImport(Glibc)
    import Glibc
#endif

/// Reading passwords: one line from standard input, or a prompt on the controlling terminal with echo
/// off. Passwords go straight into `SecretBytes` (locked, wiped on release), never into a `String`.
enum PasswordInput {
    /// The agent's limit for a password (the wire format's maxSecretLength).
    static let maximumLength = 4096

    /// A password for an existing keychain: one line of standard input, or one prompt.
    static func existing(fromStandardInput: Bool, prompt: String) throws(InputFailure) -> SecretBytes {
        let password = fromStandardInput ? try standardInputLine() : try self.prompt(prompt)
        guard password.count > 0 else { throw InputFailure("refusing an empty password") }
        return password
    }

    /// A new keychain password: one line of standard input, or two prompts that must agree. Empty
    /// passwords are refused: they would make the password classes as open as the Always classes.
    static func new(fromStandardInput: Bool, prompt: String, confirmation: String) throws(InputFailure) -> SecretBytes {
        let password = fromStandardInput ? try standardInputLine() : try confirmed(prompt, confirmation)
        guard password.count > 0 else { throw InputFailure("refusing an empty password") }
        return password
    }

    /// Asks twice on the terminal and returns the password if both answers agree.
    static func confirmed(_ prompt: String, _ confirmation: String) throws(InputFailure) -> SecretBytes {
        let first = try self.prompt(prompt)
        let second = try self.prompt(confirmation)
        guard first.constantTimeEquals(second) else { throw InputFailure("the passwords do not match") }
        return first
    }

    /// One line of standard input without its trailing newline.
    static func standardInputLine() throws(InputFailure) -> SecretBytes {
        guard let line = try readLine(from: STDIN_FILENO) else {
            throw InputFailure("no password on standard input")
        }
        return line
    }

    /// Prompts on the controlling terminal (/dev/tty, so it works even when standard input and output
    /// are redirected) with echo off, and reads one line.
    static func prompt(_ text: String) throws(InputFailure) -> SecretBytes {
        let fd = open("/dev/tty", O_RDWR | O_NOCTTY | O_CLOEXEC)
        guard fd >= 0 else {
            throw InputFailure(
                "cannot open /dev/tty to ask for the password (\(String(cString: strerror(errno)))); "
                    + "use --password-stdin")
        }
        defer { close(fd) }
        writeAll(fd, text)
        var original = termios()
        guard tcgetattr(fd, &original) == 0 else {
            throw InputFailure("cannot read the terminal settings: \(String(cString: strerror(errno)))")
        }
        var silent = original
        // Echo off, canonical mode kept so the line discipline still handles backspace and ^U.
        silent.c_lflag &= ~tcflag_t(ECHO)
        TerminalRestore.arm(fd: fd, original: original)
        defer { TerminalRestore.disarm() }
        guard tcsetattr(fd, TCSAFLUSH, &silent) == 0 else {
            throw InputFailure("cannot turn off echo: \(String(cString: strerror(errno)))")
        }
        let line: SecretBytes?
        do {
            line = try readLine(from: fd)
        } catch {
            _ = tcsetattr(fd, TCSAFLUSH, &original)
            writeAll(fd, "\n")
            throw error
        }
        _ = tcsetattr(fd, TCSAFLUSH, &original)
        // The user's Enter was not echoed.
        writeAll(fd, "\n")
        guard let line else { throw InputFailure("no password entered") }
        return line
    }

    /// Reads up to a newline or end of file, one byte at a time so that nothing after the newline is
    /// consumed (`passwd --password-stdin` reads a second line afterwards). Returns nil at end of file
    /// before any byte.
    static func readLine(from fd: Int32) throws(InputFailure) -> SecretBytes? {
        let buffer = SecretBytes(count: maximumLength)
        var count = 0
        var sawInput = false
        var byte: UInt8 = 0
        defer { byte = 0 }
        while true {
            let n = read(fd, &byte, 1)
            if n < 0 {
                if errno == EINTR { continue }
                throw InputFailure("cannot read the password: \(String(cString: strerror(errno)))")
            }
            if n == 0 { break }
            sawInput = true
            if byte == UInt8(ascii: "\n") { break }
            guard count < maximumLength else {
                throw InputFailure("the password is longer than \(maximumLength) bytes")
            }
            buffer.withUnsafeMutableBytes { $0[count] = byte }
            count += 1
        }
        guard sawInput else { return nil }
        let line = SecretBytes(count: count)
        line.withUnsafeMutableBytes { target in
            buffer.withUnsafeBytes { source in
                target.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<count]))
            }
        }
        return line
    }

    private static func writeAll(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
    }
}

/// Restores the terminal's echo if a signal ends the process while a prompt has it turned off:
/// otherwise ^C at the prompt would leave the user's shell without echo.
enum TerminalRestore {
    nonisolated(unsafe) private static var fd: Int32 = -1
    nonisolated(unsafe) private static var original = termios()
    private static let signals: [Int32] = [SIGINT, SIGTERM, SIGHUP, SIGQUIT]

    static func arm(fd: Int32, original: termios) {
        self.original = original
        self.fd = fd
        for number in signals { signal(number, handler) }
    }

    static func disarm() {
        for number in signals { signal(number, SIG_DFL) }
        fd = -1
    }

    /// Restores the settings, then dies of the same signal so the parent sees the usual status.
    private static let handler: @convention(c) (Int32) -> Void = { number in
        if TerminalRestore.fd >= 0 {
            _ = tcsetattr(TerminalRestore.fd, TCSAFLUSH, &TerminalRestore.original)
            var newline = UInt8(ascii: "\n")
            _ = write(TerminalRestore.fd, &newline, 1)
        }
        signal(number, SIG_DFL)
        raise(number)
    }
}

extension SecretBytes {
    /// A copy for `kSecValueData`. SecItem takes CFData, so one copy cannot be avoided; it is an
    /// `NSMutableData`, a reference type, so the caller can wipe the very buffer the dictionary held
    /// (`wipe()`) once the call returns.
    func dataCopy() -> NSMutableData {
        withUnsafeBytes { NSMutableData(bytes: $0.baseAddress, length: $0.count) }
    }
}

extension NSMutableData {
    /// Overwrites the bytes with zeros (best effort: copies made inside Foundation are out of reach).
    func wipe() {
        resetBytes(in: NSRange(location: 0, length: length))
    }
}
