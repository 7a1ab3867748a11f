/// Certificate validity times as Apple reads them (`SecAbsoluteTimeFromDateContentWithError` in
/// Security's `SecCertificate.c`): UTCTime `YYMMDDhhmm[ss]Z` or `YYMMDDhhmmss±hhmm`,
/// GeneralizedTime `YYYYMMDDhhmmssZ` or `YYYYMMDDhhmmss±hhmm`, into CFAbsoluteTime (seconds since
/// 2001-01-01 00:00:00 UTC).
enum X509Time {
    /// Seconds from 1970-01-01 to 2001-01-01 (`kCFAbsoluteTimeIntervalSince1970`).
    static let intervalSince1970: Double = 978_307_200

    /// The CFAbsoluteTime of a UTCTime or GeneralizedTime element. Throws for any other tag, length,
    /// non-digit or impossible date. Like Apple, a UTCTime year 50–69 yields 0 (2001-01-01) rather
    /// than an error: PKIX forbids those years and Apple's parser returns `false` (0.0) for them.
    static func absoluteTime(_ element: DER.Element) throws(CryptoError) -> Double {
        let bytes = Array(element.content)
        let isUTC: Bool, isLocalized: Bool, noSeconds: Bool
        switch bytes.count {
        case 11: (isUTC, isLocalized, noSeconds) = (true, false, true)
        case 13: (isUTC, isLocalized, noSeconds) = (true, false, false)
        case 15: (isUTC, isLocalized, noSeconds) = (false, false, false)
        case 17: (isUTC, isLocalized, noSeconds) = (true, true, false)
        case 19: (isUTC, isLocalized, noSeconds) = (false, true, false)
        default: throw CryptoError.invalidInput("certificate time has an unknown format")
        }
        switch element.tag {
        case DER.utcTime: guard isUTC else { throw CryptoError.invalidInput("UTCTime has the wrong length") }
        case DER.generalizedTime:
            guard !isUTC else { throw CryptoError.invalidInput("GeneralizedTime has the wrong length") }
        default: throw CryptoError.invalidInput("certificate time is neither UTCTime nor GeneralizedTime")
        }
        for (index, c) in bytes.enumerated() where !(c >= 0x30 && c <= 0x39) {
            let allowed =
                isLocalized
                ? (index == bytes.count - 5 && (c == UInt8(ascii: "+") || c == UInt8(ascii: "-")))
                : (index == bytes.count - 1 && c == UInt8(ascii: "Z"))
            guard allowed else { throw CryptoError.invalidInput("certificate time has a bad character") }
        }
        var cursor = 0
        func pair() -> Int {
            defer { cursor += 2 }
            return Int(bytes[cursor] - 0x30) * 10 + Int(bytes[cursor + 1] - 0x30)
        }
        var year: Int
        if isUTC {
            year = pair()
            if year < 50 {
                year += 2000
            } else if year < 70 {
                return 0
            } else {
                year += 1900
            }
        } else {
            year = pair() * 100
            year += pair()
        }
        let month = pair(), day = pair(), hour = pair(), minute = pair()
        let second = noSeconds ? 0 : pair()
        var zoneOffset = 0
        if isLocalized {
            let sign = bytes[cursor] == UInt8(ascii: "+") ? 60 : -60
            cursor += 1
            let zoneHours = pair()
            zoneOffset = sign * (zoneHours * 60 + pair())
        }
        let monthStart = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334, 365]
        let isLeap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
        guard month >= 1, month <= 12, day >= 1, day <= 31, hour <= 23, minute <= 59, second <= 60 else {
            throw CryptoError.invalidInput("certificate time is not a valid date")
        }
        let daysInMonth = monthStart[month] - monthStart[month - 1] + (month == 2 && isLeap ? 1 : 0)
        guard day <= daysInMonth else { throw CryptoError.invalidInput("certificate time is not a valid date") }
        // Apple's day count relative to 2001-01-01.
        var dy = year - 2001
        var dayCount = day
        if dy < 0 {
            dy += 1
            dayCount -= 1
        }
        let leapDays = dy / 4 - dy / 100 + dy / 400
        dayCount += (year - 2001) * 365 + leapDays + monthStart[month - 1] - 1
        if month > 2, isLeap { dayCount += 1 }
        let absolute = ((Double(dayCount) * 24 + Double(hour)) * 60 + Double(minute)) * 60 + Double(second)
        return absolute - Double(zoneOffset)
    }
}
