/// X.501 Names as Apple's certificate code reads them (Security, `OSX/sec/Security/SecCertificate.c`).
enum X501Name {
    /// Most attribute-value pairs a Name may hold here (Apple: `MAX_ATTRIBUTE_TYPE_AND_VALUES`).
    static let maximumAttributes = 1024

    /// Object identifier contents of the attribute types the summary looks at.
    static let commonName: [UInt8] = [0x55, 0x04, 0x03]
    static let organizationName: [UInt8] = [0x55, 0x04, 0x0A]
    static let organizationalUnitName: [UInt8] = [0x55, 0x04, 0x0B]
    static let description: [UInt8] = [0x55, 0x04, 0x0D]
    static let emailAddress: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x09, 0x01]

    /// One AttributeTypeAndValue: the type OID's contents and the whole value element.
    struct Attribute {
        let type: ArraySlice<UInt8>
        let value: DER.Element
    }

    /// Every attribute of a Name's content (the RDNSequence without its SEQUENCE header), in order.
    /// Throws unless every RDN is a non-empty SET of SEQUENCE { OID, value } (`parseX501NameContent`).
    static func attributes(ofContent content: ArraySlice<UInt8>, depth: Int = 1) throws(CryptoError) -> [Attribute] {
        var result: [Attribute] = []
        var rdns = DER.Reader(content, depth: depth)
        while let rdn = try rdns.next() {
            _ = try rdn.expect(DER.set, "relative distinguished name")
            guard !rdn.content.isEmpty else { throw CryptoError.invalidInput("empty relative distinguished name") }
            var atvs = try rdn.contents()
            while let atv = try atvs.next() {
                var fields = try atv.expect(DER.sequence, "attribute").contents()
                let type = try fields.read(DER.objectIdentifier, "attribute type")
                guard !type.content.isEmpty else { throw CryptoError.invalidInput("empty attribute type") }
                let value = try fields.read("attribute value")
                try fields.finish("attribute")
                result.append(Attribute(type: type.content, value: value))
                guard result.count <= maximumAttributes else {
                    throw CryptoError.invalidInput("too many name attributes")
                }
            }
        }
        return result
    }

    // MARK: Normalisation

    /// Apple's normalised Name content (`createNormalizedX501Name`): the RDN/ATV structure is copied,
    /// PrintableString values are upper-cased (a–z only) with runs of blanks (space, tab) collapsed to
    /// one space and trimmed at both ends, and the lengths of whatever got shorter are re-encoded.
    /// Everything unchanged keeps its original bytes. Input and output lack the outer SEQUENCE header.
    static func normalizedContent(_ content: ArraySlice<UInt8>) throws(CryptoError) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(content.count)
        var rdns = DER.Reader(content, depth: 1)
        var count = 0
        while let rdn = try rdns.next() {
            _ = try rdn.expect(DER.set, "relative distinguished name")
            guard !rdn.content.isEmpty else { throw CryptoError.invalidInput("empty relative distinguished name") }
            var rdnContent: [UInt8] = []
            var atvs = try rdn.contents()
            while let atv = try atvs.next() {
                var fields = try atv.expect(DER.sequence, "attribute").contents()
                let type = try fields.read(DER.objectIdentifier, "attribute type")
                guard !type.content.isEmpty else { throw CryptoError.invalidInput("empty attribute type") }
                let value = try fields.read("attribute value")
                try fields.finish("attribute")
                count += 1
                guard count <= maximumAttributes else { throw CryptoError.invalidInput("too many name attributes") }
                guard value.tag == DER.printableString else {
                    rdnContent += atv.encoded
                    continue
                }
                let normalized = normalizePrintable(value.content)
                if normalized.count == value.content.count {
                    // Same length: Apple overwrites the characters in place and keeps every header.
                    rdnContent += atv.header + type.encoded + value.header + normalized
                } else {
                    let newValue = DER.encode(DER.printableString, normalized)
                    rdnContent += DER.encode(DER.sequence, Array(type.encoded) + newValue)
                }
            }
            if rdnContent.count == rdn.content.count {
                out += rdn.header + rdnContent
            } else {
                out += DER.encode(DER.set, rdnContent)
            }
        }
        return out
    }

    /// Upper-cases a–z, turns each run of blanks into one space, drops leading and trailing blanks.
    static func normalizePrintable(_ value: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        var lastWasBlank = false
        for c in value {
            if c == 0x20 || c == 0x09 {
                if !lastWasBlank, !out.isEmpty { out.append(0x20) }
                lastWasBlank = true
            } else {
                lastWasBlank = false
                out.append(c >= 0x61 && c <= 0x7A ? c - 0x20 : c)
            }
        }
        if lastWasBlank, out.last == 0x20 { out.removeLast() }
        return out
    }

    // MARK: Display strings

    /// An attribute value as text, as Apple's `copyDERThingDescription` renders it for summaries and
    /// common names: string types decoded (PrintableString and IA5String as ASCII, UTF8String,
    /// GeneralString and UniversalString as UTF-8, T61String, VideotexString and VisibleString as
    /// ISO Latin-1, BMPString as UTF-16BE, a trailing NUL dropped except for BMPString), INTEGER and
    /// BOOLEAN as decimal (hex above 8 bytes), anything else or undecodable text as spaced hex.
    static func displayString(_ value: DER.Element) -> String {
        let content = value.content
        switch value.tag {
        case DER.integer, DER.boolean:
            guard !content.isEmpty, content.count <= 8 else { return hex(content) }
            return String(content.reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        case DER.printableString, DER.ia5String:
            let text = trimmedNUL(content)
            guard text.allSatisfy({ $0 < 0x80 }) else { return hex(content) }
            return String(decoding: text, as: UTF8.self)
        case DER.utf8String, DER.generalString, DER.universalString:
            return String(validating: trimmedNUL(content), as: UTF8.self) ?? hex(content)
        case DER.t61String, DER.videotexString, DER.visibleString:
            return String(String.UnicodeScalarView(trimmedNUL(content).map { Unicode.Scalar($0) }))
        case DER.bmpString:
            guard content.count % 2 == 0 else { return hex(content) }
            var units: [UInt16] = []
            var index = content.startIndex
            while index < content.endIndex {
                units.append(UInt16(content[index]) << 8 | UInt16(content[index + 1]))
                index += 2
            }
            return String(validating: units, as: UTF16.self) ?? hex(content)
        default:
            return hex(content)
        }
    }

    private static func trimmedNUL(_ content: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        content.last == 0 ? content.dropLast() : content
    }

    /// Apple's `copyHexDescription`: upper-case hex bytes separated by spaces.
    static func hex(_ bytes: ArraySlice<UInt8>) -> String {
        bytes.map { byte in
            let digits = Array("0123456789ABCDEF")
            return String([digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
        }.joined(separator: " ")
    }

    // MARK: Summary

    /// Apple's `SecCertificateCopySubjectSummary` over a Name's attributes (`obtainSummaryFromX501Name`):
    /// the values of the most desirable attribute type, common name > organisational unit >
    /// organisation > any other attribute, all values of that type joined as "last, …, first"; when
    /// there are descriptions and the winner is a common name, "CN (description)". Nil for a Name
    /// without attributes.
    static func summary(of attributes: [Attribute]) -> String? {
        // Rank: 0 none, 1 printable, 2 organisation, 3 organisational unit, 4 common name.
        var rank = 0
        var summary: String?
        var description: String?
        for attribute in attributes {
            let type = Array(attribute.type)
            var itemRank = 1
            var string: String?
            if type == commonName {
                itemRank = 4
            } else if type == organizationalUnitName {
                itemRank = 3
            } else if type == organizationName {
                itemRank = 2
            } else if type == Self.description {
                let text = displayString(attribute.value)
                description = description.map { "\(text), \($0)" } ?? text
                string = text
            }
            guard rank <= itemRank else { continue }
            let text = string ?? displayString(attribute.value)
            if rank == itemRank, let previous = summary {
                summary = "\(text), \(previous)"
            } else {
                rank = itemRank
                summary = text
            }
        }
        if let description, rank == 4, let name = summary { return "\(name) (\(description))" }
        return summary
    }
}
