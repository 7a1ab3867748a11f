import XCTest

@testable import LatchkeyAgent

#if canImport(Glibc)
    import Glibc
#endif

/// The process at the other end of a connection, followed by a pidfd taken either way the agent knows
/// (the kernel's SO_PEERPIDFD, and the SO_PEERCRED pid while the connection is open), with real child
/// processes.
final class PeerProcessTests: XCTestCase {
    private let methods: [PeerProcess.Method] = [.kernelReference, .pidWhileConnected]

    func testEachMethodFollowsTheConnectingProcessUntilItDies() throws {
        let peers = try PeerSocket()
        for method in methods {
            let (pid, connection) = try peers.connectingChild(stays: true)
            guard case .running(let process) = PeerProcess.of(connection: connection, pid: pid, methods: [method])
            else {
                XCTFail("\(method): the live peer is not followed")
                continue
            }
            XCTAssertEqual(
                PeerSocket.pid(ofPidfd: process.descriptor), pid, "\(method): the pidfd names another process")
            XCTAssertEqual(process.pid, pid)
            XCTAssertFalse(process.hasExited, "\(method)")
            XCTAssertEqual(fcntl(process.descriptor, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC, "\(method): not close-on-exec")
            peers.kill9(pid)
            XCTAssertTrue(PeerSocket.within(5) { process.hasExited }, "\(method): the exit is not seen")
            peers.reap(pid)
            XCTAssertTrue(process.hasExited, "\(method): reaped")
        }
    }

    /// A peer that exited before it was asked about is never taken for a live process: its pid may
    /// already name another one. As a zombie its pid still opens, and only the hung-up connection tells
    /// (the check after pidfd_open); reaped, the pid no longer opens. The kernel's own reference names
    /// the dead process (or, before Linux 6.16, none).
    func testAPeerThatHasExitedIsNotTakenForALiveOne() throws {
        let peers = try PeerSocket()
        for method in methods {
            for reaped in [false, true] {
                let (pid, connection) = try peers.connectingChild(stays: false)
                peers.waitUntilZombie(pid)
                if reaped { peers.reap(pid) }
                switch PeerProcess.of(connection: connection, pid: pid, methods: [method]) {
                case .gone:
                    break
                case .running(let process):
                    XCTAssertEqual(method, .kernelReference, "\(method) reaped=\(reaped): a dead peer was followed")
                    XCTAssertTrue(process.hasExited, "\(method) reaped=\(reaped): a dead peer looks alive")
                case .unknown(let reason):
                    XCTFail("\(method) reaped=\(reaped): \(reason)")
                }
                if !reaped { peers.reap(pid) }
            }
        }
    }
}
