import LatchkeyApplications
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// The ownership rule on real files: a directory, an application file and the executable it names
/// count only if they and every directory above them are root's and writable by root only, and none
/// is a symbolic link. Needs root (the tests skip otherwise).
final class OwnershipTests: XCTestCase {
    private var tree: RootTree!
    private var mail: String!

    override func setUpWithError() throws {
        tree = try RootTree()
        mail = try tree.executable("bin/mail")
        try tree.directory("apps")
    }

    override func tearDown() {
        tree = nil
    }

    @discardableResult
    private func mailFile(_ name: String = "mail.conf", mode: mode_t = 0o644) throws -> String {
        try tree.file("apps/" + name, RootTree.application(id: "mail", executable: mail, groups: "mail"), mode: mode)
    }

    /// The one reason `path` is ignored for, failing if it is in force or not listed at all.
    private func reason(_ path: String, _ registry: ApplicationRegistry, line: UInt = #line) -> IgnoredFile.Reason? {
        XCTAssertTrue(registry.applications.isEmpty, "\(registry.applications)", line: line)
        let reasons = registry.ignored.filter { $0.path == path }
        XCTAssertEqual(reasons.count, 1, "\(registry.ignored)", line: line)
        return reasons.first?.reason
    }

    func testAFileThatKeepsTheRulesIsInForceWithItsExecutablesDeviceAndInode() throws {
        let file = try mailFile()
        let registry = tree.registry("apps")
        var info = Glibc.stat()
        XCTAssertEqual(lstat(mail, &info), 0)
        XCTAssertEqual(
            registry.applications,
            [
                Application(
                    id: "mail",
                    identity: .executable(path: mail, device: UInt64(info.st_dev), inode: UInt64(info.st_ino)),
                    accessGroups: ["mail"], file: file)
            ])
        XCTAssertEqual(registry.ignored, [])
        XCTAssertEqual(registry.directories, [ApplicationDirectory(path: tree.path("apps"), state: .read)])
    }

    func testAFileOfAnotherOwnerIsIgnored() throws {
        let file = try mailFile()
        try tree.chown("apps/mail.conf", to: RootTree.nobody)
        XCTAssertEqual(reason(file, tree.registry("apps")), .untrusted(.notOwnedByRoot(file, uid: RootTree.nobody)))
    }

    func testAFileWritableByItsGroupOrByOthersIsIgnored() throws {
        for mode: mode_t in [0o664, 0o646, 0o666] {
            let file = try mailFile(mode: mode)
            XCTAssertEqual(
                reason(file, tree.registry("apps")), .untrusted(.writableByOthers(file, mode: UInt32(mode))),
                String(mode, radix: 8))
        }
        try mailFile(mode: 0o600)
        XCTAssertEqual(tree.registry("apps").applications.count, 1, "root-only modes are fine, read or not by others")
    }

    func testASymbolicLinkIsIgnoredEvenToAGoodFile() throws {
        let good = try tree.file("elsewhere/mail.conf", RootTree.application(id: "mail", executable: mail, groups: "g"))
        try tree.symlink("apps/mail.conf", to: good)
        let file = tree.path("apps/mail.conf")
        XCTAssertEqual(reason(file, tree.registry("apps")), .untrusted(.symbolicLink(file)))
    }

    func testWhatIsNotARegularFileIsIgnoredWithoutBeingOpened() throws {
        let fifo = tree.path("apps/fifo.conf")
        XCTAssertEqual(mkfifo(fifo, 0o644), 0)
        let directory = try tree.directory("apps/dir.conf")
        let registry = tree.registry("apps")  // would block on the FIFO if it opened it for reading
        XCTAssertEqual(
            registry.ignored,
            [
                IgnoredFile(path: directory, reason: .untrusted(.notRegularFile(directory))),
                IgnoredFile(path: fifo, reason: .untrusted(.notRegularFile(fifo))),
            ])
    }

    func testAFileLargerThanTheCapIsIgnored() throws {
        let limit = KeyFile.Limits.fileBytes
        let text = RootTree.application(id: "mail", executable: mail, groups: "g")
        // Comment lines (a line has its own cap) up to exactly `limit` bytes in all.
        let remaining = limit - text.utf8.count
        let lines = String(repeating: "#\n", count: (remaining - 100) / 2)
        let padding = lines + String(repeating: "#", count: remaining - lines.utf8.count - 1) + "\n"
        try tree.file("apps/mail.conf", text + padding)
        XCTAssertEqual(tree.registry("apps").applications.count, 1, "exactly at the cap")
        let file = try tree.file("apps/mail.conf", text + "#" + padding)
        XCTAssertEqual(
            reason(file, tree.registry("apps")), .untrusted(.tooLarge(file, bytes: Int64(limit + 1), limit: limit)))
    }

    func testADirectoryWritableByOthersCountsForNothing() throws {
        try mailFile()
        for mode: mode_t in [0o775, 0o757, 0o1777] {
            try tree.chmod("apps", mode)
            let registry = tree.registry("apps")
            XCTAssertEqual(
                registry.directories,
                [
                    ApplicationDirectory(
                        path: tree.path("apps"),
                        state: .untrusted(.writableByOthers(tree.path("apps"), mode: UInt32(mode))))
                ])
            XCTAssertEqual(registry.applications, [])
            XCTAssertEqual(registry.ignored, [], "its files are not even looked at")
        }
    }

    func testADirectoryOfAnotherOwnerOrBelowOneCountsForNothing() throws {
        try tree.directory("user/apps")
        try tree.file("user/apps/mail.conf", RootTree.application(id: "mail", executable: mail, groups: "g"))
        try tree.chown("user", to: RootTree.nobody)
        XCTAssertEqual(
            tree.registry("user/apps").directories.first?.state,
            .untrusted(.notOwnedByRoot(tree.path("user"), uid: RootTree.nobody)))
        try tree.chown("user", to: 0)
        try tree.chown("user/apps", to: RootTree.nobody)
        XCTAssertEqual(
            tree.registry("user/apps").directories.first?.state,
            .untrusted(.notOwnedByRoot(tree.path("user/apps"), uid: RootTree.nobody)))
        try tree.chown("user/apps", to: 0)
        try tree.chmod("user", 0o775)
        XCTAssertEqual(
            tree.registry("user/apps").directories.first?.state,
            .untrusted(.writableByOthers(tree.path("user"), mode: 0o775)), "a parent writable by others")
        try tree.chmod("user", 0o755)
        XCTAssertEqual(tree.registry("user/apps").applications.count, 1)
    }

    func testADirectoryReachedThroughASymbolicLinkCountsForNothing() throws {
        try mailFile()
        try tree.symlink("linked", to: tree.path("apps"))
        XCTAssertEqual(tree.registry("linked").directories.first?.state, .untrusted(.symbolicLink(tree.path("linked"))))
        try tree.directory("parent")
        try tree.symlink("parent/apps", to: tree.path("apps"))
        XCTAssertEqual(
            tree.registry("parent/apps").directories.first?.state, .untrusted(.symbolicLink(tree.path("parent/apps"))))
    }

    func testAMissingDirectoryIsAbsentAndAFileInItsPlaceIsNotADirectory() throws {
        XCTAssertEqual(tree.registry("none/apps").directories.first?.state, .absent)
        try tree.file("plain", "x")
        XCTAssertEqual(tree.registry("plain").directories.first?.state, .untrusted(.notDirectory(tree.path("plain"))))
    }

    func testADirectoryWithTooManyEntriesCountsForNothing() throws {
        try mailFile()
        let limit = ApplicationRegistry.Limits.entriesPerDirectory
        for index in 1..<limit { try tree.file("apps/other\(index).txt", "") }
        XCTAssertEqual(tree.registry("apps").applications.count, 1, "exactly at the cap")
        try tree.file("apps/one-more.txt", "")
        let registry = tree.registry("apps")
        XCTAssertEqual(registry.directories.first?.state, .tooManyEntries(limit: limit))
        XCTAssertEqual(registry.applications, [])
    }

    func testOtherNamesAreListedButNotRead() throws {
        try mailFile()
        for name in ["mail.conf~", "mail.conf.dpkg-old", ".hidden.conf", ".conf", "README", "mail.desktop"] {
            try tree.file("apps/" + name, "not even a key file")
        }
        let registry = tree.registry("apps")
        XCTAssertEqual(registry.applications.count, 1)
        XCTAssertEqual(
            Set(registry.ignored.filter { $0.reason == .notAnApplicationFile }.map(\.path)),
            Set(
                ["mail.conf~", "mail.conf.dpkg-old", ".hidden.conf", ".conf", "README", "mail.desktop"].map {
                    tree.path("apps/" + $0)
                }))
    }

    func testANameThatIsNotUTF8IsListedEscaped() throws {
        try mailFile()
        let name = Array(tree.path("apps/x").utf8) + [0xFF] + Array(".conf".utf8)
        let fd = name.withUnsafeBufferPointer { buffer in
            (buffer.map { CChar(bitPattern: $0) } + [0]).withUnsafeBufferPointer {
                open($0.baseAddress!, O_WRONLY | O_CREAT, 0o644)
            }
        }
        XCTAssertGreaterThanOrEqual(fd, 0)
        close(fd)
        let registry = tree.registry("apps")
        XCTAssertEqual(registry.applications.count, 1)
        XCTAssertEqual(registry.ignored, [IgnoredFile(path: tree.path("apps/x\\xff.conf"), reason: .nameNotUTF8)])
    }

    func testAnExecutableOfAnotherOwnerOrWritableByOthersDoesNotCount() throws {
        let file = try mailFile()
        try tree.chown("bin/mail", to: RootTree.nobody)
        XCTAssertEqual(
            reason(file, tree.registry("apps")), .untrustedExecutable(.notOwnedByRoot(mail, uid: RootTree.nobody)))
        try tree.chown("bin/mail", to: 0)
        try tree.chmod("bin/mail", 0o775)
        XCTAssertEqual(reason(file, tree.registry("apps")), .untrustedExecutable(.writableByOthers(mail, mode: 0o775)))
        try tree.chmod("bin/mail", 0o4755)
        XCTAssertEqual(tree.registry("apps").applications.count, 1, "set-user-id is no write permission")
    }

    func testAnExecutableUnderADirectoryOfAnotherOwnerOrWritableByOthersDoesNotCount() throws {
        let file = try mailFile()
        try tree.chown("bin", to: RootTree.nobody)
        XCTAssertEqual(
            reason(file, tree.registry("apps")),
            .untrustedExecutable(.notOwnedByRoot(tree.path("bin"), uid: RootTree.nobody)))
        try tree.chown("bin", to: 0)
        try tree.chmod("bin", 0o1777)
        XCTAssertEqual(
            reason(file, tree.registry("apps")),
            .untrustedExecutable(.writableByOthers(tree.path("bin"), mode: 0o1777)),
            "a sticky world-writable directory, like /tmp")
    }

    func testAnExecutableThroughASymbolicLinkOrMissingOrNotAFileDoesNotCount() throws {
        try tree.symlink("bin/mail-link", to: mail)
        let linkFile = try tree.file(
            "apps/a.conf", RootTree.application(id: "a", executable: tree.path("bin/mail-link"), groups: "g"))
        XCTAssertEqual(
            reason(linkFile, tree.registry("apps")), .untrustedExecutable(.symbolicLink(tree.path("bin/mail-link"))))
        unlink(linkFile)

        try tree.symlink("linked-bin", to: tree.path("bin"))
        let throughLink = try tree.file(
            "apps/b.conf", RootTree.application(id: "b", executable: tree.path("linked-bin/mail"), groups: "g"))
        XCTAssertEqual(
            reason(throughLink, tree.registry("apps")), .untrustedExecutable(.symbolicLink(tree.path("linked-bin"))))
        unlink(throughLink)

        let missing = try tree.file(
            "apps/c.conf", RootTree.application(id: "c", executable: tree.path("bin/none"), groups: "g"))
        XCTAssertEqual(reason(missing, tree.registry("apps")), .untrustedExecutable(.missing(tree.path("bin/none"))))
        unlink(missing)

        let directory = try tree.file(
            "apps/d.conf", RootTree.application(id: "d", executable: tree.path("bin"), groups: "g"))
        XCTAssertEqual(
            reason(directory, tree.registry("apps")), .untrustedExecutable(.notRegularFile(tree.path("bin"))))
    }

    func testAScriptCanNeverBeAnExecutable() throws {
        let script = try tree.file("bin/script", "#!/bin/sh\nexit 0\n", mode: 0o755)
        let file = try tree.file("apps/script.conf", RootTree.application(id: "s", executable: script, groups: "g"))
        XCTAssertEqual(reason(file, tree.registry("apps")), .untrustedExecutable(.script(script)))
        try tree.file("bin/script", "#\n!/bin/sh\n", mode: 0o755)
        XCTAssertEqual(tree.registry("apps").applications.count, 1, "only #! at the very start makes a script")
    }

    func testEmptyMalformedAndInvalidFilesAreIgnoredWithTheirReason() throws {
        let empty = try tree.file("apps/empty.conf", "")
        let malformed = try tree.file("apps/malformed.conf", "[Application]\r\nId=x\r\n")
        let invalid = try tree.file("apps/invalid.conf", "[Application]\nId=x\nAccessGroups=g\n")
        let registry = tree.registry("apps")
        XCTAssertEqual(
            registry.ignored,
            [
                IgnoredFile(path: empty, reason: .empty),
                IgnoredFile(path: invalid, reason: .invalid(.noIdentifier)),
                IgnoredFile(path: malformed, reason: .malformed(KeyFileError(line: 1, .controlCharacter(13)))),
            ])
    }
}
