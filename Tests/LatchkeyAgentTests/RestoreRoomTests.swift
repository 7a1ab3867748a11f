import LatchkeyCrypto
import XCTest

@testable import LatchkeyAgent

/// The agent holds at most one backup file's worth of restore uploads at once, over every connection
/// (`RestoreRoom`), and a share comes back when its upload goes.
final class RestoreRoomTests: XCTestCase {
    func testTheRoomHoldsOneFilesWorthAndSharesComeBack() throws {
        var first: RestoreRoom.Share? = try XCTUnwrap(RestoreRoom.take(RestoreRoom.capacity - 10))
        XCTAssertNil(RestoreRoom.take(11), "beyond the room: refused")
        var second: RestoreRoom.Share? = try XCTUnwrap(RestoreRoom.take(10), "what is left fits")
        XCTAssertNil(RestoreRoom.take(1))
        XCTAssertEqual(first?.bytes, RestoreRoom.capacity - 10)
        first = nil
        XCTAssertNotNil(RestoreRoom.take(RestoreRoom.capacity - 10), "a share given back is free again")
        XCTAssertEqual(RestoreRoom.capacity, BackupFile.maximumFileSize)
        XCTAssertNotNil(second)
        second = nil
        XCTAssertNotNil(RestoreRoom.take(RestoreRoom.capacity), "all of it, once every share is back")
    }
}
