import LatchkeyApplications
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Reloading without a restart: the registry notices added, edited, chmod'ed and removed files and a
/// replaced executable, and stays as it is while nothing changes.
final class ApplicationRegistryWatchTests: XCTestCase {
    /// Waits until changes made so far are older than the racy window, so that the next load is sure
    /// of them (`ApplicationsFingerprint`): a bounded wait, not a measurement.
    private func settle() {
        Thread.sleep(forTimeInterval: 2.1)
    }

    func testAFingerprintIsCurrentUntilSomethingItSawChanges() throws {
        /// A tree with an application file and its executable, and an empty second directory.
        func makeTree() throws -> (RootTree, mail: String, file: String) {
            let tree = try RootTree()
            let mail = try tree.executable("bin/mail")
            let file = try tree.file("apps/mail.conf", RootTree.application(id: "mail", executable: mail, groups: "g"))
            try tree.directory("etc")
            return (tree, mail, file)
        }
        let changes: [(String, (RootTree, String, String) throws -> Void)] = [
            ("a file added", { tree, _, _ in try tree.file("etc/new.conf", "") }),
            (
                "the executable replaced",
                { tree, mail, _ in
                    XCTAssertEqual(rename(try tree.executable("bin/mail.new"), mail), 0)
                }
            ),
            (
                "a file edited in place",
                { _, _, file in
                    let fd = open(file, O_WRONLY | O_APPEND)
                    XCTAssertEqual(write(fd, "#\n", 2), 2)
                    close(fd)
                }
            ),
            ("a directory above the executable made writable", { tree, _, _ in try tree.chmod("bin", 0o775) }),
            ("a file made group-writable", { tree, _, _ in try tree.chmod("apps/mail.conf", 0o664) }),
            ("a file given away", { tree, _, _ in try tree.chown("apps/mail.conf", to: RootTree.nobody) }),
            ("a file removed", { _, _, file in XCTAssertEqual(unlink(file), 0) }),
        ]
        // Traffic in the directories on the way (like /etc or /usr/bin) changes nothing that counts.
        let noise: [(String, (RootTree, String, String) throws -> Void)] = [
            ("a file added beside the executable", { tree, _, _ in try tree.file("bin/other", "") }),
            ("a file added above the applications.d directory", { tree, _, _ in try tree.file("other", "") }),
            ("the executable's times touched", { _, mail, _ in XCTAssertEqual(utimes(mail, nil), 0) }),
        ]
        // One tree per change, all settled at once.
        let trees = try changes.map { _ in try makeTree() }
        let quietTree = try makeTree()
        XCTAssertFalse(
            trees[0].0.registry("apps", "etc").fingerprint.isCurrent(),
            "files this recent are not trusted to be settled")
        settle()
        for ((change, make), (tree, mail, file)) in zip(changes, trees) {
            let registry = tree.registry("apps", "etc")
            XCTAssertEqual(registry.applications.count, 1, change)
            XCTAssertTrue(registry.fingerprint.isCurrent(), "before: \(change)")
            try make(tree, mail, file)
            XCTAssertFalse(registry.fingerprint.isCurrent(), change)
        }
        let (tree, mail, file) = quietTree
        let registry = tree.registry("apps", "etc")
        for (change, make) in noise {
            try make(tree, mail, file)
            XCTAssertTrue(registry.fingerprint.isCurrent(), change)
        }
    }

    func testTheWatchReloadsWhenFilesChangeAndOnlyThen() throws {
        let tree = try RootTree()
        let mail = try tree.executable("bin/mail")
        try tree.directory("apps")
        settle()
        let watch = ApplicationRegistryWatch(directories: [tree.path("apps")], checkInterval: .zero)
        XCTAssertEqual(watch.current().applications, [])
        XCTAssertEqual(watch.reloads, 0, "nothing changed")

        try tree.file("apps/mail.conf", RootTree.application(id: "mail", executable: mail, groups: "mail"))
        XCTAssertEqual(watch.current().grant(for: try tree.identity(running: mail)).accessGroups, ["mail"])
        XCTAssertGreaterThanOrEqual(watch.reloads, 1)

        // A package upgrade replaces the executable: the new file is the application after a reload.
        XCTAssertEqual(rename(try tree.executable("bin/mail.new"), mail), 0)
        XCTAssertEqual(watch.current().grant(for: try tree.identity(running: mail)).accessGroups, ["mail"])

        settle()
        _ = watch.current()  // the reload that sees the changes as settled
        let reloads = watch.reloads
        for _ in 0..<3 { _ = watch.current() }
        XCTAssertEqual(watch.reloads, reloads, "a settled registry is not read again")
    }

    func testTheWatchLooksAtMostOncePerInterval() throws {
        let tree = try RootTree()
        let mail = try tree.executable("bin/mail")
        try tree.directory("apps")
        let watch = ApplicationRegistryWatch(directories: [tree.path("apps")], checkInterval: .seconds(3600))
        try tree.file("apps/mail.conf", RootTree.application(id: "mail", executable: mail, groups: "mail"))
        XCTAssertEqual(watch.current().applications, [], "not time to look yet")
        XCTAssertEqual(watch.reloads, 0)
    }
}
