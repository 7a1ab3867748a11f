import LatchkeyCodec
import LatchkeyModel
import LatchkeyValueTestSupport
import LatchkeyWire
import latchkey_fuzz

/// Mutations that know the format: frame lengths that lie, counts and lengths far beyond the bytes,
/// nesting beyond the cap, bad UTF-8 in keys, keys that are duplicates only under Unicode equivalence, and
/// splices of two inputs; plus `mutate` (flips, inserts, deletions, cuts) and pure noise. Seeded, so a
/// failure reproduces from its seed and iteration.
struct Mutator {
    var rng: SplitMix64

    /// The lengths and counts that probe the caps: zero, the caps and one past them, and the extremes.
    static let extremes: [UInt32] = [
        0, 1, 0x7f, 0xffff, UInt32(Wire.maxRequestFrame), UInt32(Wire.maxRequestFrame + 1),
        UInt32(Wire.maxCollectionCount), UInt32(Wire.maxCollectionCount + 1), 0x7fff_ffff, 0xffff_ffff,
    ]

    init(seed: UInt64) { rng = SplitMix64(seed: seed) }

    /// A frame stream derived from `seed` (and sometimes `other`).
    mutating func frames(from seed: [UInt8], other: [UInt8]) -> [UInt8] {
        switch Int.random(in: 0..<10, using: &rng) {
        case 0: return lieAboutFrameLength(seed)
        case 1: return lieAboutACount(seed)
        case 2: return Seeds.frame(payload: [Wire.protocolVersion, Opcode.add.rawValue] + tooDeep())
        case 3: return Seeds.frame(payload: [Wire.protocolVersion, Opcode.copyMatching.rawValue] + awkwardKeys())
        case 4: return splice(seed, other)
        case 5: return randomBytes(Int.random(in: 0..<256, using: &rng), using: &rng)
        case 6:
            // Noise behind a plausible header: reaches the decoder instead of stopping at the length.
            let body = randomBytes(Int.random(in: 0..<200, using: &rng), using: &rng)
            return Seeds.frame(
                payload: [Wire.protocolVersion, Opcode.allCases.randomElement(using: &rng)!.rawValue] + body)
        default: return mutate(seed, using: &rng)
        }
    }

    /// A value encoding derived from `seed`.
    mutating func dictionary(from seed: [UInt8], other: [UInt8]) -> [UInt8] {
        switch Int.random(in: 0..<8, using: &rng) {
        case 0: return lieAboutACount(seed)
        case 1: return tooDeep()
        case 2: return awkwardKeys()
        case 3: return splice(seed, other)
        case 4: return ValueCodec.encode(.dictionary(secItemDictionary()))
        default: return mutate(seed, using: &rng)
        }
    }

    /// The length of one frame of the stream replaced by an extreme, or by its true length ± a little.
    mutating func lieAboutFrameLength(_ stream: [UInt8]) -> [UInt8] {
        var starts: [Int] = []
        var at = 0
        while at + 4 <= stream.count {
            starts.append(at)
            at += 4 + Int(readU32(stream, at))
        }
        guard let start = starts.randomElement(using: &rng) else { return stream }
        let truth = readU32(stream, start)
        let lie =
            Bool.random(using: &rng)
            ? Self.extremes.randomElement(using: &rng)!
            : truth &+ UInt32(bitPattern: Int32.random(in: -3...3, using: &rng))
        var out = stream
        writeU32(&out, start, lie)
        return out
    }

    /// A u32 after a string, data, array or dictionary tag (a length or a count) replaced by an extreme.
    mutating func lieAboutACount(_ bytes: [UInt8]) -> [UInt8] {
        let candidates = bytes.indices.filter { [0x01, 0x02, 0x07, 0x08].contains(bytes[$0]) && $0 + 5 <= bytes.count }
        guard let tag = candidates.randomElement(using: &rng) else { return mutate(bytes, using: &rng) }
        var out = bytes
        writeU32(&out, tag + 1, Self.extremes.randomElement(using: &rng)!)
        return out
    }

    /// A SecItem dictionary whose value nests one or a few levels beyond `Wire.maxValueDepth`, sometimes
    /// exactly at it.
    mutating func tooDeep() -> [UInt8] {
        let depth = Wire.maxValueDepth + Int.random(in: -1...3, using: &rng)
        var value: SecValue = .string("x")
        for level in 1..<depth {
            value = level % 2 == 0 ? .array([value]) : .dictionary(["k": value])
        }
        // encode does not check the caps, so it writes what a hostile client would.
        return ValueCodec.encode(.dictionary(["class": .string("genp"), "svce": .string("deep"), "f_deep": value]))
    }

    /// A dictionary with keys the decoder must refuse: invalid UTF-8, or two keys equal only under
    /// canonical equivalence (precomposed and decomposed é).
    mutating func awkwardKeys() -> [UInt8] {
        let keys: [[UInt8]] =
            Bool.random(using: &rng)
            ? [[0xc3, 0xa9], [0x65, 0xcc, 0x81]]
            : [Array("svc".utf8) + [[0xfe], [0xff], [0xc0, 0x80], [0xed, 0xa0, 0x80]].randomElement(using: &rng)!]
        var out: [UInt8] = [0x08]
        out.appendU32(UInt32(keys.count + 1))
        out.appendU32(5)
        out += Array("class".utf8) + [0x01]
        out.appendU32(4)
        out += Array("genp".utf8)
        for key in keys {
            out.appendU32(UInt32(key.count))
            out += key + [0x09]
        }
        return out
    }

    /// The start of one input followed by the end of another.
    mutating func splice(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        Array(a.prefix(Int.random(in: 0...a.count, using: &rng)))
            + Array(b.suffix(Int.random(in: 0...b.count, using: &rng)))
    }

    /// A dictionary of real SecItem keys with values of random types, so the parser's type checks, coercions
    /// and refusals are reached far more often than from random strings.
    mutating func secItemDictionary() -> SecDictionary {
        var d: SecDictionary = [:]
        if Int.random(in: 0..<8, using: &rng) != 0 {
            d["class"] = .string(["genp", "inet", "cert", "keys", "idnt", "nope"].randomElement(using: &rng)!)
        }
        for _ in 0..<Int.random(in: 0..<10, using: &rng) {
            d[Self.keys.randomElement(using: &rng)!] = secItemValue()
        }
        return d
    }

    private mutating func secItemValue() -> SecValue {
        switch Int.random(in: 0..<6, using: &rng) {
        case 0: return .string(Self.words.randomElement(using: &rng)!)
        case 1: return .int([0, 1, -1, 3, 443, Int64.max, Int64.min].randomElement(using: &rng)!)
        case 2: return .bool(Bool.random(using: &rng))
        case 3: return .data(Array(Self.words.randomElement(using: &rng)!.utf8))
        case 4: return .double([0, 1, -0.5, .infinity, .nan].randomElement(using: &rng)!)
        default: return randomValue(depth: 3, using: &rng)
        }
    }

    /// Keys of every kind the parser dispatches on, and a few it does not know.
    static let keys = [
        "class", "svce", "acct", "labl", "desc", "icmt", "gena", "crtr", "type", "invi", "nega", "pdmn", "sync",
        "agrp", "accc", "cdat", "mdat", "srvr", "sdmn", "ptcl", "atyp", "port", "path", "subj", "issr", "slnr",
        "kcls", "klbl", "atag", "bsiz", "esiz", "perm", "sign", "extr", "nleg", "m_Limit", "m_CaseInsensitive",
        "m_ItemList", "m_Policy", "m_HostOrSubdomainOfHost", "m_Bogus", "r_Data", "r_Attributes", "r_Ref",
        "r_PersistentRef", "r_Bogus", "v_Data", "v_Ref", "v_PersistentRef", "v_Bogus", "u_AuthUI", "u_OpPrompt",
        "u_NoAuthUI", "u_Bogus", "f_whatever", "zzzz", "x", "",
    ]

    /// String values the parser gives a meaning to, and a few near misses.
    static let words = [
        "genp", "inet", "cert", "keys", "idnt", "ak", "aku", "akpu", "ck", "cku", "dk", "dku", "syna", "m_LimitAll",
        "m_LimitOne", "u_AuthUIA", "u_AuthUIF", "u_AuthUIS", "443", "0", "1", "htps", "form", "-1", "akk", "",
    ]
}

private func readU32(_ bytes: [UInt8], _ at: Int) -> UInt32 {
    bytes[at..<(at + 4)].reduce(0) { $0 << 8 | UInt32($1) }
}

private func writeU32(_ bytes: inout [UInt8], _ at: Int, _ value: UInt32) {
    bytes.replaceSubrange(
        at..<(at + 4),
        with: [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)])
}

extension Array where Element == UInt8 {
    fileprivate mutating func appendU32(_ value: UInt32) {
        append(contentsOf: [
            UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff),
        ])
    }
}
