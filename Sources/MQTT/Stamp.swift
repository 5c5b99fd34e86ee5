#if canImport(Glibc)
    import Glibc
#endif

/// A reading of the monotonic clock, for the bookkeeping of each publish (`Connection.Sent`) and
/// of the connection (`Control.connectedAt`).
///
/// Why not `ContinuousClock.Instant`: it is a resilient type of the standard library (not
/// `@frozen`), so its size is known only at run time, and so is that of every struct that holds
/// one. `Sent` was copied, moved and destroyed through its metadata's value witnesses, and the
/// fields of `Control` after `connectedAt` were found by offsets read from metadata: ~2.5 k
/// instructions per publish and acknowledgement (callgrind, bench scenario 7). A `Stamp` is two
/// words of a known layout. Stamps are compared only with one another.
struct Stamp: Comparable, Sendable {
    private var nanoseconds: Int64

    static var now: Stamp {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Stamp(nanoseconds: Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec))
    }

    static func < (a: Stamp, b: Stamp) -> Bool { a.nanoseconds < b.nanoseconds }

    static func - (a: Stamp, b: Stamp) -> Duration { .nanoseconds(a.nanoseconds - b.nanoseconds) }
}
