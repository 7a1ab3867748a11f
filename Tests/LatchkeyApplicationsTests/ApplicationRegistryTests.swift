import LatchkeyApplications
import XCTest

#if canImport(Glibc)
    import Glibc
#endif

/// Which files are in force when several directories and files meet (override, duplicates), and what
/// each kind of caller is granted.
final class ApplicationRegistryTests: XCTestCase {
    /// The engine's `Caller.defaultAccessGroup` is "default" (LatchkeyEngine, which this target cannot
    /// import): items added before issue 12 are there, so the two must never drift apart.
    func testDefaultGroupIsTheEnginesDefault() {
        XCTAssertEqual(ApplicationRegistry.defaultAccessGroup, "default")
        XCTAssertEqual(
            ApplicationRegistry.defaultDirectories,
            ["/usr/share/latchkey/applications.d", "/etc/latchkey/applications.d"])
    }

    // MARK: - Which files are in force

    func testAnAdministratorsFileReplacesThePackagesFileOfTheSameName() throws {
        let tree = try RootTree()
        let mail = try tree.executable("bin/mail")
        let packaged = try tree.file(
            "pkg/mail.conf", RootTree.application(id: "mail", executable: mail, groups: "wide;open"))
        let other = try tree.file("pkg/other.conf", RootTree.application(id: "other", snap: "other", groups: "o"))
        let local = try tree.file("etc/mail.conf", RootTree.application(id: "mail", executable: mail, groups: "narrow"))
        let registry = tree.registry("pkg", "etc")
        XCTAssertEqual(registry.applications.map(\.file), [local, other])
        XCTAssertEqual(registry.applications.first?.accessGroups, ["narrow"])
        XCTAssertEqual(registry.ignored, [IgnoredFile(path: packaged, reason: .overridden(by: local))])
        XCTAssertEqual(registry.grant(for: try tree.identity(running: mail)).accessGroups, ["narrow"])

        // The order of the directories is the precedence, not their names.
        let reversed = tree.registry("etc", "pkg")
        XCTAssertEqual(reversed.applications.first?.accessGroups, ["wide", "open"])
    }

    func testAnEmptyOrBrokenAdministratorsFileDisablesThePackagesFile() throws {
        let tree = try RootTree()
        let mail = try tree.executable("bin/mail")
        let packaged = try tree.file("pkg/mail.conf", RootTree.application(id: "mail", executable: mail, groups: "g"))
        let local = try tree.file("etc/mail.conf", "")
        var registry = tree.registry("pkg", "etc")
        XCTAssertEqual(registry.applications, [])
        XCTAssertEqual(
            registry.ignored,
            [IgnoredFile(path: local, reason: .empty), IgnoredFile(path: packaged, reason: .overridden(by: local))])

        // Broken, of another owner, or a symbolic link (systemd's mask is a link to /dev/null): the
        // administrator's intent is to replace the package's file, so that never falls back to it.
        try tree.file("etc/mail.conf", "[Application]\nId=mail\n")
        registry = tree.registry("pkg", "etc")
        XCTAssertEqual(registry.applications, [])
        XCTAssertEqual(registry.ignored.last, IgnoredFile(path: packaged, reason: .overridden(by: local)))
        try tree.chown("etc/mail.conf", to: RootTree.nobody)
        XCTAssertEqual(tree.registry("pkg", "etc").applications, [])
        unlink(local)
        try tree.symlink("etc/mail.conf", to: "/dev/null")
        registry = tree.registry("pkg", "etc")
        XCTAssertEqual(registry.applications, [])
        XCTAssertEqual(
            registry.ignored,
            [
                IgnoredFile(path: local, reason: .untrusted(.symbolicLink(local))),
                IgnoredFile(path: packaged, reason: .overridden(by: local)),
            ])
    }

    func testAnUntrustedDirectoryOverridesNothing() throws {
        let tree = try RootTree()
        let mail = try tree.executable("bin/mail")
        let packaged = try tree.file("pkg/mail.conf", RootTree.application(id: "mail", executable: mail, groups: "g"))
        try tree.file("etc/mail.conf", "")
        try tree.chmod("etc", 0o777)
        let registry = tree.registry("pkg", "etc")
        XCTAssertEqual(registry.applications.map(\.file), [packaged])
        XCTAssertEqual(
            registry.directories.map(\.state), [.read, .untrusted(.writableByOthers(tree.path("etc"), mode: 0o777))])
    }

    func testTwoFilesWithOneIDAreBothIgnored() throws {
        let tree = try RootTree()
        let a = try tree.file("pkg/a.conf", RootTree.application(id: "same", snap: "one", groups: "g"))
        let b = try tree.file("etc/b.conf", RootTree.application(id: "same", snap: "two", groups: "h"))
        let c = try tree.file("etc/c.conf", RootTree.application(id: "other", snap: "three", groups: "i"))
        let registry = tree.registry("pkg", "etc")
        XCTAssertEqual(registry.applications.map(\.file), [c])
        XCTAssertEqual(
            registry.ignored,
            [
                IgnoredFile(path: b, reason: .sameID("same", others: [a])),
                IgnoredFile(path: a, reason: .sameID("same", others: [b])),
            ])
    }

    func testTwoFilesClaimingOneApplicationAreBothIgnored() throws {
        let tree = try RootTree()
        let mail = try tree.executable("bin/mail")
        XCTAssertEqual(link(mail, tree.path("bin/mail-hardlink")), 0)
        let cases: [(String, String, String)] = [
            (
                RootTree.application(id: "a", executable: mail, groups: "g"),
                RootTree.application(id: "b", executable: mail, groups: "h"), "the same executable file"
            ),
            (
                RootTree.application(id: "a", executable: mail, groups: "g"),
                RootTree.application(id: "b", executable: tree.path("bin/mail-hardlink"), groups: "h"),
                "the same executable file"
            ),
            (
                RootTree.application(id: "a", flatpak: "org.example.App", groups: "g"),
                RootTree.application(id: "b", flatpak: "org.example.App", groups: "h"), "FlatpakId=org.example.App"
            ),
            (
                RootTree.application(id: "a", snap: "app", groups: "g"),
                RootTree.application(id: "b", snap: "app", groups: "h"), "SnapName=app"
            ),
        ]
        for (first, second, what) in cases {
            let a = try tree.file("apps/a.conf", first)
            let b = try tree.file("apps/b.conf", second)
            let registry = tree.registry("apps")
            XCTAssertEqual(registry.applications, [], what)
            XCTAssertEqual(
                registry.ignored,
                [
                    IgnoredFile(path: a, reason: .sameApplication(what, others: [b])),
                    IgnoredFile(path: b, reason: .sameApplication(what, others: [a])),
                ], what)
            XCTAssertEqual(registry.grant(for: try tree.identity(running: mail)).basis, .unlisted, what)
        }
    }

    // MARK: - Grants

    func testAListedExecutableGetsItsGroupsInOrder() throws {
        let tree = try RootTree()
        let mail = try tree.executable("bin/mail")
        let file = try tree.file(
            "apps/mail.conf", RootTree.application(id: "org.example.Mail", executable: mail, groups: "mail;shared"))
        let grant = tree.registry("apps").grant(for: try tree.identity(running: mail))
        XCTAssertEqual(
            grant,
            Grant(applicationID: "org.example.Mail", accessGroups: ["mail", "shared"], basis: .executable(file: file)))
    }

    func testAnyDoubtMakesAListedExecutableAnUnlistedProgram() throws {
        let tree = try RootTree()
        let mail = try tree.executable("bin/mail")
        try tree.file("apps/mail.conf", RootTree.application(id: "mail", executable: mail, groups: "mail"))
        let registry = tree.registry("apps")
        let doubts: [CallerIdentity.Doubt] = [
            .traced(by: 77), .loaderVariable("LD_PRELOAD"), .replacedExecutable, .unreadable("no /proc"),
        ]
        for doubt in doubts {
            XCTAssertEqual(
                registry.grant(for: try tree.identity(running: mail, doubts: [doubt])),
                Grant(applicationID: nil, accessGroups: ["default"], basis: .doubted([doubt])), "\(doubt)")
        }
    }

    func testAnExecutableMatchesByItsFileAtItsPathOnly() throws {
        let tree = try RootTree()
        let mail = try tree.executable("bin/mail")
        try tree.file("apps/mail.conf", RootTree.application(id: "mail", executable: mail, groups: "mail"))
        let registry = tree.registry("apps")
        let loaded = try tree.identity(running: mail)
        XCTAssertEqual(registry.grant(for: loaded).accessGroups, ["mail"])

        // Replaced after the load (a new inode at the same path): not the file the administrator named.
        XCTAssertEqual(rename(try tree.executable("bin/mail.new"), mail), 0)
        let replaced = try tree.identity(running: mail)
        XCTAssertNotEqual(replaced.executable?.inode, loaded.executable?.inode)
        XCTAssertEqual(
            registry.grant(for: replaced), Grant(applicationID: nil, accessGroups: ["default"], basis: .unlisted))

        // The loaded file reached through another name (a hard link elsewhere): not at the named path.
        var elsewhere = loaded
        elsewhere.executable?.path = tree.path("home/user/mail")
        XCTAssertEqual(registry.grant(for: elsewhere).basis, .unlisted)

        // Another device with the same inode number.
        var otherDevice = loaded
        otherDevice.executable?.device &+= 1
        XCTAssertEqual(registry.grant(for: otherDevice).basis, .unlisted)
    }

    func testUnlistedProgramsAndCallersWithoutAnExecutableShareDefault() throws {
        let tree = try RootTree()
        let mail = try tree.executable("bin/mail")
        let other = try tree.executable("bin/other")
        try tree.file("apps/mail.conf", RootTree.application(id: "mail", executable: mail, groups: "mail"))
        let registry = tree.registry("apps")
        let shared = Grant(applicationID: nil, accessGroups: ["default"], basis: .unlisted)
        XCTAssertEqual(registry.grant(for: try tree.identity(running: other)), shared)
        XCTAssertEqual(registry.grant(for: CallerIdentity(uid: 1000, pid: 1)), shared)
    }

    func testFlatpakApplications() throws {
        let tree = try RootTree()
        let file = try tree.file(
            "apps/evolution.conf",
            RootTree.application(id: "evolution", flatpak: "org.gnome.Evolution", groups: "mail;calendar"))
        try tree.file(
            "apps/shared.conf", RootTree.application(id: "host", snap: "host", groups: "org.example.Squatted"))
        let registry = tree.registry("apps")
        func flatpak(_ id: String, doubts: [CallerIdentity.Doubt] = []) -> CallerIdentity {
            CallerIdentity(uid: 1000, pid: 1, flatpakID: id, doubts: doubts)
        }
        XCTAssertEqual(
            registry.grant(for: flatpak("org.gnome.Evolution")),
            Grant(applicationID: "evolution", accessGroups: ["mail", "calendar"], basis: .flatpak(file: file)))
        XCTAssertEqual(
            registry.grant(for: flatpak("org.gnome.Evolution", doubts: [.replacedExecutable, .traced(by: 3)]))
                .accessGroups,
            ["mail", "calendar"], "the sandbox vouches for the id, whatever is doubted about the executable")
        XCTAssertEqual(
            registry.grant(for: flatpak("org.example.Other")),
            Grant(applicationID: "org.example.Other", accessGroups: ["org.example.Other"], basis: .flatpakWithoutFile))
        XCTAssertEqual(
            registry.grant(for: flatpak("org.example.Other", doubts: [.loaderVariable("LD_PRELOAD")])).accessGroups,
            ["org.example.Other"], "never default")
        XCTAssertEqual(
            registry.grant(for: flatpak("org.example.Squatted")).accessGroups, [],
            "a Flatpak named like a group a file grants gets nothing without its own file")
        XCTAssertEqual(registry.grant(for: flatpak("default")).accessGroups, [], "not a Flatpak id: never default")
        XCTAssertEqual(registry.grant(for: flatpak("a.b")).accessGroups, [])
    }

    func testSnaps() throws {
        let tree = try RootTree()
        let file = try tree.file("apps/tb.conf", RootTree.application(id: "tb", snap: "thunderbird", groups: "mail"))
        try tree.file(
            "apps/shared.conf", RootTree.application(id: "host", flatpak: "org.example.Host", groups: "snap.squat"))
        let registry = tree.registry("apps")
        func snap(_ name: String) -> CallerIdentity {
            CallerIdentity(uid: 1000, pid: 1, snapName: name, doubts: [.replacedExecutable])
        }
        XCTAssertEqual(
            registry.grant(for: snap("thunderbird")),
            Grant(applicationID: "tb", accessGroups: ["mail"], basis: .snap(file: file)))
        XCTAssertEqual(
            registry.grant(for: snap("firefox")),
            Grant(applicationID: "snap.firefox", accessGroups: ["snap.firefox"], basis: .snapWithoutFile))
        XCTAssertEqual(registry.grant(for: snap("default")).accessGroups, ["snap.default"], "never the shared group")
        XCTAssertEqual(registry.grant(for: snap("squat")).accessGroups, [])
        XCTAssertEqual(registry.grant(for: snap("Not_A_Snap")).accessGroups, [])
    }

    func testASandboxedCallerWithTwoSandboxIdentitiesGetsNothing() {
        let registry = ApplicationRegistry(directories: [])
        let grant = registry.grant(
            for: CallerIdentity(uid: 1000, pid: 1, flatpakID: "org.example.App", snapName: "app"))
        XCTAssertEqual(grant.accessGroups, [])
        XCTAssertNil(grant.applicationID)
    }

    func testAFlatpakOrSnapIdentityIsNeverTakenForItsExecutable() throws {
        let tree = try RootTree()
        let mail = try tree.executable("bin/mail")
        try tree.file("apps/mail.conf", RootTree.application(id: "mail", executable: mail, groups: "mail"))
        let registry = tree.registry("apps")
        var identity = try tree.identity(running: mail)
        identity.flatpakID = "org.example.Sandboxed"
        XCTAssertEqual(registry.grant(for: identity).accessGroups, ["org.example.Sandboxed"])
        identity.flatpakID = nil
        identity.snapName = "sandboxed"
        XCTAssertEqual(registry.grant(for: identity).accessGroups, ["snap.sandboxed"])
    }
}
