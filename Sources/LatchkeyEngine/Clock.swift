#if canImport(Glibc)
    import Glibc
#endif

/// Wall-clock time as `CFAbsoluteTime` (seconds since 2001-01-01 UTC), as item dates are stored.
package enum Clock {
    package static let unixToReferenceDate = 978_307_200.0

    package static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Double(ts.tv_sec) - unixToReferenceDate + Double(ts.tv_nsec) / 1e9
    }
}
