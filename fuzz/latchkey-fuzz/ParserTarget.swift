import LatchkeyCodec
import LatchkeyModel
import LatchkeyWire

/// `DictionaryParser` (securityd's dictionary rules) on dictionaries from a fuzzer: each dictionary a request
/// carries, as the engine parses it, and on its own target any dictionary the value codec decodes, through
/// every parser.
///
/// Checks, beyond "does not trap": a refusal carries one of the statuses the parser documents, and the
/// outcome does not depend on the order in which the dictionary yields its keys (securityd's semantics do
/// not; a Swift dictionary's order changes with its capacity and from one process to the next).
package enum ParserTarget {
    /// The statuses a dictionary can be refused with: errSecParam, errSecNoSuchAttr, errSecNoSuchClass, and
    /// errSecUnimplemented for keys that are recognised but not supported.
    static let expectedStatuses: Set<Int32> = [
        SecStatus.param, SecStatus.noSuchAttr, SecStatus.noSuchClass, SecStatus.unimplemented,
    ]

    /// The dictionary target: `input` decoded as one value; a dictionary goes through every parser.
    package static func run(_ input: [UInt8]) -> FuzzOutcome {
        var outcome = FuzzOutcome()
        let value: SecValue
        do {
            value = try ValueCodec.decode(input)
        } catch {
            return outcome  // a CodecError by its type: the codec's own fuzz tests look further
        }
        let canonical = ValueCodec.encode(value)
        if (try? ValueCodec.decode(canonical)).map(ValueCodec.encode) != canonical {
            outcome.problems.append("a decoded value's encoding does not decode to the same bytes")
        }
        guard case .dictionary(let dictionary) = value else { return outcome }
        outcome.requests += 1
        outcome.parsed += check("parseAdd", dictionary, &outcome) { d throws(SecError) in
            try DictionaryParser.parseAdd(d)
        }
        for operation in [QueryOperation.copyMatching, .update, .delete] {
            outcome.parsed += check("parseQuery(\(operation))", dictionary, &outcome) { d throws(SecError) in
                try DictionaryParser.parseQuery(d, for: operation)
            }
        }
        for itemClass in ItemClass.allCases {
            outcome.parsed += check("parseChanges(\(itemClass))", dictionary, &outcome) { d throws(SecError) in
                try DictionaryParser.parseChanges(d, itemClass: itemClass)
            }
        }
        return outcome
    }

    /// Parses the SecItem dictionaries of a decoded request as the engine does (`Keychain.add`,
    /// `copyMatching`, `update`, `delete`); returns how many the parser accepted.
    static func parse(_ request: Request, into outcome: inout FuzzOutcome) -> Int {
        switch request {
        case .add(let d):
            return check("parseAdd", d, &outcome) { d throws(SecError) in try DictionaryParser.parseAdd(d) }
        case .copyMatching(let d):
            return check("parseQuery(copyMatching)", d, &outcome) { d throws(SecError) in
                try DictionaryParser.parseQuery(d, for: .copyMatching)
            }
        case .delete(let d):
            return check("parseQuery(delete)", d, &outcome) { d throws(SecError) in
                try DictionaryParser.parseQuery(d, for: .delete)
            }
        case .update(let query, let attributes):
            var itemClass: ItemClass?
            let parsed = check("parseQuery(update)", query, &outcome) { d throws(SecError) in
                let parsed = try DictionaryParser.parseQuery(d, for: .update)
                itemClass = parsed.itemClass
                return parsed
            }
            guard let itemClass else { return parsed }
            return parsed
                + check("parseChanges", attributes, &outcome) { d throws(SecError) in
                    try DictionaryParser.parseChanges(d, itemClass: itemClass)
                }
        default:
            return 0
        }
    }

    /// Runs `parse` on `dictionary` and on a copy that yields its keys in another order; records a
    /// problem if the two disagree or the refusal has an unexpected status. Returns 1 if it parsed.
    private static func check<T: Equatable>(
        _ name: String, _ dictionary: SecDictionary, _ outcome: inout FuzzOutcome,
        _ parse: (SecDictionary) throws(SecError) -> T
    ) -> Int {
        let first = Result { () throws(SecError) in try parse(dictionary) }
        let second = Result { () throws(SecError) in try parse(reordered(dictionary)) }
        switch (first, second) {
        case (.success(let a), .success(let b)):
            // A NaN is never equal to itself: such results are compared by acceptance only.
            if a != b, !containsNaN(.dictionary(dictionary)) {
                outcome.problems.append("\(name): the result depends on the order of the keys")
            }
            return 1
        case (.failure(let a), .failure(let b)):
            if !expectedStatuses.contains(a.status) { outcome.problems.append("\(name): unexpected \(a)") }
            if a.status != b.status {
                outcome.problems.append(
                    "\(name): the status depends on the order of the keys (\(a.status), \(b.status))")
            }
        default:
            outcome.problems.append("\(name): accepted or refused depending on the order of the keys")
        }
        return 0
    }

    private static func containsNaN(_ value: SecValue) -> Bool {
        switch value {
        case .double(let d), .date(let d): d.isNaN
        case .array(let values): values.contains(where: containsNaN)
        case .dictionary(let entries): entries.values.contains(where: containsNaN)
        default: false
        }
    }

    /// The same entries, inserted in reverse order into a dictionary of another capacity, so that it
    /// yields them in a different order.
    private static func reordered(_ dictionary: SecDictionary) -> SecDictionary {
        var copy = SecDictionary(minimumCapacity: dictionary.count * 4 + 8)
        for (key, value) in dictionary.reversed() { copy[key] = value }
        return copy
    }
}
