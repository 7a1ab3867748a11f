import Foundation
import XCTest

@testable import Latchkey

/// Several programs that find no agent start one each at the same moment: one agent wins the socket's
/// lock and the others exit, saying so on the readiness pipe (`AgentReadiness.anotherAgentListens`).
/// Every program must then reach the winner, which may still be opening the keychain when the losers
/// exit; before, a program whose agent lost connected once and failed if the winner was not listening
/// yet ("the agent started but … does not accept connections").
final class ConcurrentStartTests: AgentTestCase {
    func testProgramsStartingAgentsAtOnceAllReachOne() throws {
        try createKeychain()
        var failures: [String] = []
        for round in 0..<6 {
            stopAgent()
            waitUntilNothingListens()
            AgentClient.shared.resetConnection()
            let processes = try (0..<8).map { _ in
                let process = Process()
                process.executableURL = URL(fileURLWithPath: Self.binDirectory + "/latchkey")
                process.arguments = ["status"]
                let errors = Pipe()
                process.standardOutput = FileHandle.nullDevice
                process.standardError = errors
                try process.run()
                return (process, errors)
            }
            for (process, errors) in processes {
                let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                if process.terminationStatus != 0 { failures.append("round \(round): \(message)") }
            }
        }
        XCTAssertEqual(failures, [], "programs that did not reach the agent")
    }
}
