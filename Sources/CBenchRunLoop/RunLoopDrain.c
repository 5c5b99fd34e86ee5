// homemqtt-bench's async main, drained in Foundation's run loop instead of dispatch_main() when
// HOMEMQTT_BENCH_MAIN_RUN_LOOP is set (Callgrind.start sets it for the processes it runs).
//
// Why: valgrind 3.19 (Debian 12's) crashes in dispatch_main(), which an async main calls to park
// the main thread: libdispatch's thread-exit handler calls sigsuspend with a mask it keeps in
// read-only memory, and valgrind's wrapper writes to that mask. CFRunLoopRun parks the main
// thread without it and drains the main queue (the main actor's jobs) as well.
//
// How: the Swift runtime asks swift_task_asyncMainDrainQueue_hook, when set, to drain the main
// queue for an async main. It is set here before main runs (a constructor), because the async
// main reaches the drain before any Swift code of ours could run. When the main task returns the
// runtime exits the process, so the run loop never has to be stopped.
#include "CBenchRunLoop.h"
#include <stdlib.h>

typedef void (*DrainOriginal)(void) __attribute__((swiftcall));
typedef void (*DrainOverride)(DrainOriginal original) __attribute__((swiftcall));

// The runtime's hook (libswift_Concurrency), and Foundation's run loop (libFoundation).
extern DrainOverride swift_task_asyncMainDrainQueue_hook;
extern void CFRunLoopRun(void);

static int drainsInRunLoop = 0;

__attribute__((swiftcall)) static void drainInRunLoop(DrainOriginal original) {
    (void)original;
    CFRunLoopRun();
    exit(0);
}

__attribute__((constructor)) static void installRunLoopDrain(void) {
    if (getenv("HOMEMQTT_BENCH_MAIN_RUN_LOOP") == NULL) return;
    drainsInRunLoop = 1;
    swift_task_asyncMainDrainQueue_hook = drainInRunLoop;
}

int homemqtt_bench_drains_in_run_loop(void) { return drainsInRunLoop; }
