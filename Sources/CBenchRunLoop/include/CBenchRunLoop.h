#ifndef CBENCHRUNLOOP_H
#define CBENCHRUNLOOP_H

/// Whether the process's async main drains its main queue in Foundation's run loop (set before
/// main from HOMEMQTT_BENCH_MAIN_RUN_LOOP; see RunLoopDrain.c).
int homemqtt_bench_drains_in_run_loop(void);

#endif
