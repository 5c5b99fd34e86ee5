#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A reading of the monotonic clock, for the bookkeeping of each publish (`Connection.Sent`) and
/// of the connection (`Control.connectedAt`).
///
/// Why not `ContinuousClock.Instant`: it is a resilient type of the standard library (not
/// `@frozen`), so its size is known only at run time, and so is that of every struct that holds
/// one. `Sent` was copied, moved and destroyed through its metadata's value witnesses, and the
/// fields of `Control` after `connectedAt` were found by offsets read from metadata: ~2.5 k
/// instructions per publish and acknowledgement (callgrind, bench scenario 7). A `Stamp` is one
/// word. Stamps are compared only with one another. Like the continuous clock, it counts the
/// time the machine sleeps (`CLOCK_BOOTTIME` on Linux, `CLOCK_MONOTONIC` on Darwin): a publish
/// sent just before a suspend is not "recent" when the connection drops on resume.
struct Stamp: Comparable, Sendable {
    private var nanoseconds: Int64

    static var now: Stamp {
        var time = timespec()
        #if canImport(Glibc)
            clock_gettime(CLOCK_BOOTTIME, &time)
        #else
            clock_gettime(CLOCK_MONOTONIC, &time)
        #endif
        return Stamp(nanoseconds: Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec))
    }

    static func < (a: Stamp, b: Stamp) -> Bool { a.nanoseconds < b.nanoseconds }

    static func - (a: Stamp, b: Stamp) -> Duration { .nanoseconds(a.nanoseconds - b.nanoseconds) }
}
