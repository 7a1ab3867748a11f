import ArgumentParser
import Foundation
import Latchkey
import LatchkeySecrets

/// `latchkey migrate --from secret-service`: copies every item of the Secret Service provider running
/// now (gnome-keyring, KWallet, KeePassXC) into the keychain, as Secret Service items with the same
/// collection, label, attributes, secret and content type (docs/MIGRATING.md).
struct MigrateCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "migrate",
        abstract: "Copy the items of another Secret Service provider into the keychain.",
        discussion: """
            --from secret-service reads every item of every collection of the provider that owns \
            org.freedesktop.secrets on the session bus now (gnome-keyring, KWallet, KeePassXC), \
            unlocking locked ones through the provider's own prompt, and stores each in the keychain \
            as a Secret Service item: the provider's default collection goes to latchkey's default \
            (login), any other to the collection with the same label (created when missing), with the \
            same label, attributes (xdg:schema included), secret bytes and content type, so that \
            secret-tool finds them once latchkeyd serves org.freedesktop.secrets. The provider's \
            in-memory 'session' collection is not copied. The provider's items are only read (what \
            its prompt unlocked stays unlocked there).

            An item already in the keychain with the same collection, attributes, label, secret and \
            content type is left alone ('unchanged'), so running the command again adds nothing \
            twice. When an item with the same attributes differs in its label, secret or content \
            type, --on-conflict decides: keep (the default) leaves the keychain's item and reports \
            it, replace gives it the provider's label and secret, duplicate adds the provider's item \
            beside it.

            Every item is written on its own: a failure leaves the items copied so far, says at which \
            item it stopped, and exits 1; running the same command again continues. --dry-run says \
            what would be done (collection, label, attributes; never a secret) and writes nothing.

            Each item is reported on standard output as '<outcome>: collection "...", label "...", \
            attributes {...}', then a summary. Exit status 0 when every item is in the keychain \
            (added, unchanged, replaced, duplicated or kept), 1 when an item could not be read \
            (still locked) or stored, or the run stopped. See docs/MIGRATING.md for the switch-over.

            Examples:
              latchkey migrate --from secret-service --dry-run
              latchkey migrate --from secret-service
            """)

    enum Source: String, ExpressibleByArgument {
        case secretService = "secret-service"
    }

    enum Conflict: String, ExpressibleByArgument {
        case keep, replace, duplicate
    }

    @Option(help: "Where to copy from: secret-service (the provider owning org.freedesktop.secrets).")
    var from: Source

    @Flag(help: "Only list what would be done; write nothing.")
    var dryRun = false

    @Option(help: "When an item with the same attributes differs: keep, replace or duplicate.")
    var onConflict: Conflict = .keep

    @Flag(help: "Report only items that were not copied as they are, and the summary.")
    var quiet = false

    func run() throws {
        let source: SecretServiceSource
        let agentPID: Int32
        do {
            source = try SecretServiceSource()
        } catch {
            throw InputFailure("migrate: \(error)").report()
        }
        do throws(KeychainControl.Failure) {
            agentPID = try KeychainControl.agentProcessID()
        } catch {
            throw controlFailure("migrate", error)
        }
        if let owner = source.ownerPID, owner == UInt32(bitPattern: agentPID) {
            throw InputFailure(
                "migrate: org.freedesktop.secrets is served by latchkeyd itself (pid \(owner)): stop the other "
                    + "provider's Secret Service only after migrating (docs/MIGRATING.md)"
            ).report()
        }
        var migration = Migration(
            source: source, dryRun: dryRun, onConflict: onConflict.rawValue, quiet: quiet)
        do {
            try migration.run()
        } catch let stop as Migration.Stop {
            migration.printSummary()
            throw InputFailure(stop.message).report()
        }
        migration.printSummary()
        if migration.counts.notCopied > 0 { throw ExitCode(ExitStatus.failure) }
    }
}
