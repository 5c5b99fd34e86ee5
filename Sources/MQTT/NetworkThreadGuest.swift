internal import CMosquitto
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Work of another part of the process that a client's network thread runs between its reads
/// and writes while it is connected (`MQTTClient.host(_:)`).
///
/// Why: a message received on the network thread and answered by work on another thread
/// crosses threads twice — a wake-up and a context switch each way, which on a busy
/// two-core machine cost more than the work. Run here, the work starts where the message
/// arrived, and what it publishes is written by the thread that queued it.
///
/// What holds: the thread calls `attach` before the first `runWaiting` and `detach` when it
/// stops taking the work (the connection ended, another guest is hosted, the client stops);
/// after `detach` it calls nothing more until the next `attach`. The guest's work must not
/// block for long: the connection's reads, writes and keepalive wait while it runs.
public protocol MQTTNetworkThreadGuest: AnyObject, Sendable {
    /// The network thread takes the work from now on; `wake` (callable from any thread) ends
    /// the thread's wait for its socket.
    func attach(wake: @escaping @Sendable () -> Void)

    /// Runs what waits, or as much of it as the guest wants to run here (the rest it runs
    /// elsewhere). From its return until `didWait`, the guest calls `wake` for work that comes.
    func runWaiting()

    /// The thread is done waiting for its socket (work that comes now needs no `wake`).
    func didWait()

    /// The network thread no longer takes the work.
    func detach()
}

/// The read end of a pipe that the network thread polls beside its socket while it hosts a
/// guest, and the write end that wakes it. A pipe (not an eventfd) because Glibc's module
/// does not export `eventfd`; a byte per wake, read away after the wait.
final class LoopWaker: Sendable {
    let readEnd: Int32
    private let writeEnd: Int32

    init?() {
        var ends: [Int32] = [-1, -1]
        // Glibc's module does not export `pipe2`: close-on-exec is set just after, which a
        // process spawned in between (the gateway spawns none) would miss.
        guard pipe(&ends) == 0 else { return nil }
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        readEnd = ends[0]
        writeEnd = ends[1]
    }

    deinit {
        close(readEnd)
        close(writeEnd)
    }

    /// A full pipe already wakes the reader: a failed write loses nothing.
    func wake() {
        var byte: UInt8 = 1
        _ = write(writeEnd, &byte, 1)
    }

    func drain() {
        var buffer: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        while withUnsafeMutableBytes(of: &buffer, { read(readEnd, $0.baseAddress, $0.count) }) == 32 {}
    }
}

extension Connection {
    /// The guest the client wants hosted, attached or detached to match; the one hosted now.
    func follow(
        _ wanted: (any MQTTNetworkThreadGuest)?, hosted: (any MQTTNetworkThreadGuest)?
    ) -> (any MQTTNetworkThreadGuest)? {
        guard wanted !== hosted else { return hosted }
        hosted?.detach()
        guard let wanted, let waker else { return nil }
        wanted.attach(wake: { waker.wake() })
        return wanted
    }

    /// One turn of the loop with a guest: its work, then a wait for the socket (readable, or
    /// writable when libmosquitto has something to write) or a wake, then libmosquitto's own
    /// loop without waiting, which reads, writes and keeps the connection alive.
    func turn(hosting guest: any MQTTNetworkThreadGuest, waker: LoopWaker, _ descriptors: inout [pollfd]) -> Int32 {
        guest.runWaiting()
        let socket = mosquitto_socket(h)
        // The socket closed meanwhile (a server DISCONNECT): libmosquitto's loop says so at once.
        guard socket >= 0 else { return mosquitto_loop(h, 0, 1) }
        // Set before libmosquitto is asked whether it has something to write: a packet queued
        // by another thread after that question finds it set and wakes the wait. The fence
        // keeps the question (a plain read inside libmosquitto) after the store on weakly
        // ordered processors (ARM).
        waitingInPoll.store(true, ordering: .sequentiallyConsistent)
        atomicMemoryFence(ordering: .sequentiallyConsistent)
        descriptors[0] = pollfd(
            fd: socket, events: Int16(POLLIN) | (mosquitto_want_write(h) ? Int16(POLLOUT) : 0), revents: 0)
        descriptors[1] = pollfd(fd: waker.readEnd, events: Int16(POLLIN), revents: 0)
        _ = poll(&descriptors, 2, Int32(min(max(configuration.guestWaitLimit, 0.001), 60) * 1000))
        waitingInPoll.store(false, ordering: .sequentiallyConsistent)
        guest.didWait()
        if descriptors[1].revents != 0 { waker.drain() }
        return mosquitto_loop(h, 0, 1)
    }

    /// After a call into libmosquitto that may have queued a packet: a network thread waiting
    /// in `turn` does not see libmosquitto's own wake-up (its socket pair), so it is woken
    /// here; a busy one, or one in `mosquitto_loop`, costs nothing.
    func wakeIfWaiting() {
        guard waitingInPoll.load(ordering: .sequentiallyConsistent) else { return }
        waker?.wake()
    }
}
