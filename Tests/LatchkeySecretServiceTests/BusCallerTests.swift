import Foundation
import LatchkeyApplications
import LatchkeyDBus
import LatchkeySecretService
import LatchkeyTestSupport
import XCTest

/// Secret Service callers identified through the bus (issue 12 §1): real clients (`dbus-send`) call a
/// service on a private dbus-daemon, which identifies them as the Secret Service does (`BusCallers`).
final class BusCallerTests: XCTestCase {
    /// What the service saw, for the test (written on the loop thread, read after `sync`).
    final class Seen: @unchecked Sendable {
        var senders: [String] = []
        var identities: [CallerIdentity?] = []
        var callers: BusCallers?
    }

    private var daemon: PrivateBus!
    private var service: BusConnection!
    private let seen = Seen()

    override func setUpWithError() throws {
        daemon = try PrivateBus(system: false)
        service = try BusConnection(.address(daemon.address))
        try service.sync { [seen] bus in
            let callers = BusCallers()
            seen.callers = callers
            try bus.addObject(path: "/who") { call in
                guard call.member == "Who", let sender = call.sender else { return .notHandled }
                seen.senders.append(sender)
                seen.identities.append(callers.identity(of: sender, on: bus))
                try call.reply()
                return .handled
            }
            _ = try bus.requestName("org.example.Who")
        }
    }

    override func tearDown() {
        service?.close()
        daemon?.stop()
        service = nil
        daemon = nil
    }

    /// Runs `dbus-send` with `environment`, calling the service; returns its pid once it has exited.
    private func callWithDBusSend(environment: [String: String] = [:]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-send")
        process.arguments = [
            "--bus=\(daemon.address)", "--print-reply", "--dest=org.example.Who", "/who", "org.example.Who.Who",
        ]
        process.environment = ["PATH": "/usr/bin:/bin"].merging(environment) { $1 }
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0)
        return process.processIdentifier
    }

    func testAClientIsItsExecutable() throws {
        let pid = try callWithDBusSend()
        let identity = try XCTUnwrap(try service.sync { [seen] _ in seen.identities.first ?? nil })
        XCTAssertEqual(identity.pid, pid)
        XCTAssertEqual(identity.uid, getuid())
        XCTAssertEqual(identity.executable?.path, "/usr/bin/dbus-send")
        XCTAssertEqual(identity.doubts, [])
        XCTAssertNil(identity.flatpakID)
    }

    func testAClientStartedWithLDPreloadIsDoubted() throws {
        let candidates: [String] = [
            "/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/aarch64-linux-gnu/libc.so.6", "/lib64/libc.so.6",
        ]
        let library = try XCTUnwrap(candidates.first { FileManager.default.fileExists(atPath: $0) })
        _ = try callWithDBusSend(environment: ["LD_PRELOAD": library])
        let identity = try XCTUnwrap(try service.sync { [seen] _ in seen.identities.first ?? nil })
        XCTAssertEqual(identity.executable?.path, "/usr/bin/dbus-send")
        XCTAssertEqual(identity.doubts, [.loaderVariable("LD_PRELOAD")])
    }

    /// A unique name keeps the identity it was first given (the bus never hands the name to another
    /// connection); asked afresh once its client is gone, the bus knows it no more.
    func testAnIdentityIsKeptPerUniqueName() throws {
        _ = try callWithDBusSend()
        let (sender, first) = try service.sync { [seen] _ in (seen.senders[0], seen.identities[0]) }
        let (again, afresh) = try service.sync { [seen] bus in
            (seen.callers?.identity(of: sender, on: bus), BusCallers.identify(sender, on: bus))
        }
        XCTAssertNotNil(first)
        XCTAssertEqual(again, first)
        XCTAssertNil(afresh, "the bus still knows a name whose client exited")
    }
}
