import Foundation
import Latchkey
import LatchkeyDBus

/// One run of `latchkey migrate`: walks the provider's collections and items in order and sends each
/// item to the agent on its own, so that whatever stops the run leaves whole items behind it.
struct Migration {
    /// The run stopped before the last item: the message says where.
    struct Stop: Error {
        var message: String
    }

    /// What happened to the items so far.
    struct Counts {
        var added = 0
        var unchanged = 0
        var kept = 0
        var replaced = 0
        var duplicated = 0
        /// Still locked after the provider's prompt: not read, not copied.
        var locked = 0
        /// Refused by the agent (over a cap, malformed).
        var refused = 0

        var done: Int { added + unchanged + kept + replaced + duplicated + locked + refused }
        var notCopied: Int { locked + refused }
    }

    let source: SecretServiceSource
    let dryRun: Bool
    let onConflict: String
    let quiet: Bool
    private(set) var counts = Counts()
    private var total = 0

    init(source: SecretServiceSource, dryRun: Bool, onConflict: String, quiet: Bool) {
        self.source = source
        self.dryRun = dryRun
        self.onConflict = onConflict
        self.quiet = quiet
    }

    /// A collection to copy, with its items and where they go.
    private struct Plan {
        var collection: SecretServiceSource.Collection
        /// nil: latchkey's default collection.
        var target: String?
        var items: [String]
    }

    mutating func run() throws {
        let plans: [Plan]
        do {
            plans = try plan()
        } catch {
            throw Stop(message: "migrate: \(error); nothing was copied")
        }
        total = plans.reduce(0) { $0 + $1.items.count }
        for plan in plans where !plan.items.isEmpty {
            try copy(plan)
        }
    }

    /// The provider's collections, but its in-memory `session`: its default collection (the one with id
    /// `login`, else the one `default` names) goes to latchkey's default, every other one by label.
    private func plan() throws -> [Plan] {
        let collections = try source.collections()
        let loginPath = SecretServiceSource.root + "/collection/login"
        let defaultPath = collections.contains { $0.path == loginPath } ? loginPath : source.defaultCollection()
        return try collections.filter { $0.path != SecretServiceSource.root + "/collection/session" }.map {
            Plan(collection: $0, target: $0.path == defaultPath ? nil : $0.label, items: try source.items(of: $0.path))
        }
    }

    private mutating func copy(_ plan: Plan) throws {
        do {
            // Unlocking what is unlocked already returns at once; the provider prompts for the rest.
            var dismissed = false
            // latchkeyd takes at most 1,024 objects per Unlock; the collection's own path is one more.
            let perCall = 1000
            for chunk in stride(from: 0, to: plan.items.count, by: perCall) {
                let objects =
                    (chunk == 0 ? [plan.collection.path] : [])
                    + plan.items[chunk..<min(chunk + perCall, plan.items.count)]
                dismissed = try source.unlock(objects).dismissed || dismissed
                if dismissed { break }
            }
            if dismissed {
                printError("migrate: the prompt to unlock collection \(quoted(plan.collection.label)) was dismissed")
            }
        } catch {
            throw stop(at: plan.items.first ?? plan.collection.path, plan, "\(error)")
        }
        for start in stride(from: 0, to: plan.items.count, by: SecretServiceSource.secretsPerCall) {
            let batch = Array(plan.items[start..<min(start + SecretServiceSource.secretsPerCall, plan.items.count)])
            var secrets: [String: (secret: [UInt8], contentType: String)]
            do {
                secrets = try source.secrets(of: batch)
            } catch {
                throw stop(at: batch[0], plan, "\(error)")
            }
            defer {
                for (_, value) in secrets { BusValue.wipeShared(value.secret) }
            }
            for item in batch {
                try copy(item, secret: secrets[item], plan)
            }
        }
    }

    private mutating func copy(
        _ item: String, secret: (secret: [UInt8], contentType: String)?, _ plan: Plan
    ) throws {
        let properties: SecretServiceSource.ItemProperties
        do {
            properties = try source.properties(of: item)
        } catch {
            throw stop(at: item, plan, "\(error)")
        }
        let line =
            "collection \(quoted(plan.collection.label)), label \(quoted(properties.label)), attributes "
            + describe(properties.attributes)
        guard let secret else {
            counts.locked += 1
            printError("migrate: locked, not copied: \(line)")
            return
        }
        let request = SecretServiceImport(
            collectionLabel: plan.target, label: properties.label, attributes: properties.attributes,
            secret: secret.secret, contentType: secret.contentType, onConflict: onConflict, dryRun: dryRun)
        let outcome: String
        do throws(KeychainControl.Failure) {
            outcome = try KeychainControl.importSecretServiceItem(request).outcome
        } catch  where error.status == errSecParam {
            counts.refused += 1
            printError("migrate: refused by the keychain (\(error.detail ?? "errSecParam")): \(line)")
            return
        } catch {
            let message =
                SecCopyErrorMessageString(error.status, nil).map { $0 as String } ?? "OSStatus \(error.status)"
            let hint = hint(for: error.status, detail: error.detail).map { "; \($0)" } ?? ""
            throw stop(at: item, plan, "\(message) (\(error.status))\(error.detail.map { ": \($0)" } ?? "")\(hint)")
        }
        switch outcome {
        case "added": counts.added += 1
        case "unchanged": counts.unchanged += 1
        case "kept": counts.kept += 1
        case "replaced": counts.replaced += 1
        case "duplicated": counts.duplicated += 1
        default: throw stop(at: item, plan, "the agent answered an unknown outcome '\(outcome)'")
        }
        let verb: String
        switch (outcome, dryRun) {
        case ("unchanged", _): verb = "unchanged"
        case ("kept", false): verb = "kept (the keychain's item differs; see --on-conflict)"
        case ("kept", true): verb = "would keep (the keychain's item differs; see --on-conflict)"
        case ("added", true): verb = "would add"
        case ("replaced", true): verb = "would replace"
        case ("duplicated", true): verb = "would duplicate"
        default: verb = outcome
        }
        if !quiet || outcome == "kept" { print("\(verb): \(line)") }
    }

    /// Where the run stopped, and how to go on.
    private func stop(at item: String, _ plan: Plan, _ why: String) -> Stop {
        let number = counts.done + 1
        return Stop(
            message: "migrate: stopped at item \(number) of \(total) (\(item), collection "
                + "\(quoted(plan.collection.label))): \(Self.printable(why))\n"
                + "latchkey: \(counts.done) item(s) done before it; run the same command again to continue")
    }

    func printSummary() {
        let c = counts
        let prefix = dryRun ? "dry run, nothing written: " : ""
        print(
            "\(prefix)\(c.done) of \(total) item(s): \(c.added) added, \(c.unchanged) unchanged, \(c.kept) kept, "
                + "\(c.replaced) replaced, \(c.duplicated) duplicated, \(c.locked) locked, \(c.refused) refused")
        if !dryRun && c.done > 0 {
            print(
                "provider: \(source.sessionIsEncrypted ? "secrets read in an encrypted session" : "secrets read in a plain session (the provider offers no encrypted one)")"
            )
        }
    }

    /// `text` quoted, without control or format characters (C1 controls, bidirectional overrides): the
    /// provider chose it, and it goes to the user's terminal.
    private func quoted(_ text: String) -> String { Self.printable(text).debugDescription }

    static func printable(_ text: String) -> String {
        String(
            String.UnicodeScalarView(
                text.unicodeScalars.filter {
                    $0.properties.generalCategory != .control && $0.properties.generalCategory != .format
                }))
    }

    /// Attributes as `{"name": "value", ...}`, sorted by name bytes.
    private func describe(_ attributes: [(name: String, value: String)]) -> String {
        let sorted = attributes.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        return "{" + sorted.map { "\(quoted($0.name)): \(quoted($0.value))" }.joined(separator: ", ") + "}"
    }
}
