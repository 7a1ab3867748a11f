import Foundation

/// A private `dbus-daemon` listening on a socket in a temporary directory, of the session or system type,
/// with an allow-all policy. Runs as our child (`--nofork`) so `stop()` can kill and reap it.
public final class PrivateBus {
    public let address: String
    public let directory: String
    private let process: Process

    /// - Parameters:
    ///   - socketPath: where to listen (default: a socket in a fresh temporary directory).
    ///   - allowAnyUser: let every uid connect (a root test process serving a user's session bus).
    public init(system: Bool, socketName: String? = nil, socketPath: String? = nil, allowAnyUser: Bool = false) throws {
        directory = NSTemporaryDirectory() + "lkdesk-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let socket = socketPath ?? (directory + "/" + (socketName ?? (system ? "system.sock" : "session.sock")))
        let config = """
            <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
             "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
            <busconfig>
              <type>\(system ? "system" : "session")</type>
              <listen>unix:path=\(socket)</listen>
              <auth>EXTERNAL</auth>
              <policy context="default">\(allowAnyUser ? "\n    <allow user=\"*\"/>" : "")
                <allow send_destination="*" eavesdrop="true"/>
                <allow eavesdrop="true"/>
                <allow own="*"/>
              </policy>
            </busconfig>
            """
        let configPath = directory + "/bus.conf"
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)

        process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--config-file=\(configPath)", "--nofork", "--nopidfile", "--print-address=1"]
        let output = Pipe()
        process.standardOutput = output
        // Its complaints (it cannot raise the fd limit as root in a container) go to a file, not the test log.
        _ = FileManager.default.createFile(atPath: directory + "/daemon.log", contents: nil)
        process.standardError = FileHandle(forWritingAtPath: directory + "/daemon.log")
        try process.run()
        // The address is printed once the daemon listens.
        var printed = Data()
        while !printed.contains(UInt8(ascii: "\n")) {
            let chunk = output.fileHandleForReading.availableData
            if chunk.isEmpty { break }
            printed += chunk
        }
        let line = String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        guard line.hasPrefix("unix:") else {
            process.terminate()
            throw NSError(domain: "PrivateBus", code: 1, userInfo: [NSLocalizedDescriptionKey: "dbus-daemon: \(line)"])
        }
        address = "unix:path=\(socket)"
    }

    /// Kills the daemon (every client sees its connection drop) and waits for it.
    public func stop() {
        guard process.isRunning else { return }
        process.terminate()
        process.waitUntilExit()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(atPath: directory)
    }
}
